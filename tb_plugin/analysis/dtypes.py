"""Element sizes in bytes of the dtype names a trace writes: the C++ spellings of
`Input type` (record_shapes: "float", "c10::Half", "long int") and the ScalarType names of
record_param_comms' `dtype` ("Float", "BFloat16", "Long"). One table for the FLOPs/bytes of
operators (efficiency/flops.py) and the message sizes of collectives (distributed/)."""

from __future__ import annotations

ELEMENT_BYTES = {
    # record_shapes `Input type` (C++ type names)
    "long int": 8, "long": 8, "int64_t": 8, "unsigned long": 8, "double": 8, "float": 4,
    "int": 4, "unsigned int": 4, "c10::Half": 2, "half": 2, "c10::BFloat16": 2, "short": 2,
    "short int": 2, "unsigned char": 1, "signed char": 1, "bool": 1, "char": 1,
    "c10::complex<float>": 8, "c10::complex<double>": 16, "c10::complex<c10::Half>": 4,
    "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1,
    # record_param_comms `dtype` (c10::ScalarType names)
    "Byte": 1, "Char": 1, "Short": 2, "Int": 4, "Long": 8, "Half": 2, "Float": 4, "Double": 8,
    "ComplexHalf": 4, "ComplexFloat": 8, "ComplexDouble": 16, "Bool": 1, "BFloat16": 2,
    "Float8_e5m2": 1, "Float8_e4m3fn": 1, "Float8_e5m2fnuz": 1, "Float8_e4m3fnuz": 1,
    "UInt16": 2, "UInt32": 4, "UInt64": 8,
}
