"""The one table of element sizes (analysis/dtypes.py), against numpy's own item sizes for every
name that has a numpy twin (not restated numbers), and its use by both readers."""

import numpy as np

from tb_plugin.analysis.distributed import comm_bytes
from tb_plugin.analysis.dtypes import ELEMENT_BYTES
from tb_plugin.analysis.efficiency import flops

NUMPY_TWINS = {
    "long int": np.int64, "long": np.int64, "int64_t": np.int64, "unsigned long": np.uint64,
    "double": np.float64, "float": np.float32, "int": np.int32, "unsigned int": np.uint32,
    "c10::Half": np.float16, "half": np.float16, "short": np.int16, "short int": np.int16,
    "unsigned char": np.uint8, "signed char": np.int8, "bool": np.bool_, "char": np.int8,
    "c10::complex<float>": np.complex64, "c10::complex<double>": np.complex128,
    "Byte": np.uint8, "Char": np.int8, "Short": np.int16, "Int": np.int32, "Long": np.int64,
    "Half": np.float16, "Float": np.float32, "Double": np.float64, "ComplexFloat": np.complex64,
    "ComplexDouble": np.complex128, "Bool": np.bool_, "UInt16": np.uint16, "UInt32": np.uint32,
    "UInt64": np.uint64,
}
#: No numpy twin: bfloat16 is 16 bits, float8 8 bits, a complex of two halves 32 bits.
NO_TWIN = {"c10::BFloat16": 2, "BFloat16": 2, "c10::complex<c10::Half>": 4, "ComplexHalf": 4,
           **{name: 1 for name in ELEMENT_BYTES if "Float8" in name}}


def test_every_size_is_numpy_itemsize_or_its_bit_width():
    assert set(ELEMENT_BYTES) == set(NUMPY_TWINS) | set(NO_TWIN)
    for name, twin in NUMPY_TWINS.items():
        assert ELEMENT_BYTES[name] == np.dtype(twin).itemsize, name
    for name, size in NO_TWIN.items():
        assert ELEMENT_BYTES[name] == size, name


def test_flops_and_collectives_read_the_same_table():
    assert flops._SIZES is ELEMENT_BYTES
    assert comm_bytes.TYPE_SIZES is ELEMENT_BYTES
