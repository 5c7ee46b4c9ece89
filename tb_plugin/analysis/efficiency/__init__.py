"""Hardware efficiency: FLOPs and bytes (`flops.py`, `flop_formulas.py`, `flop_links.py`,
`op_schemas.py`), peaks and precision (`hardware.py`, `precision.py`), tensor/matrix-core flags
(`tensor_cores.py`), the roofline and MFU (`roofline.py`) and torch.compile regions
(`compiled.py`).
Nothing is imported here."""
