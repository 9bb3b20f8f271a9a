"""means_by_type.py DIR — the rows of tests/native/means_by_type.tsr's data sets (see there)."""
import sys

import numpy as np

ROWS = {
    "bf16": ([1, 1 + 2**-7, 3, 2**-130], [1 + 2**-7, 1 + 2**-6, -1, 2**-130], np.float32),
    "f16": ([1, 1 + 2**-10, 3, 60000], [1 + 2**-10, 1 + 2**-9, -1, 60000], np.float16),
    "f64": ([1, 1 + 2**-40, 3, 1e300], [1 + 2**-40, 1, -1, 1e300], np.float64),
    "f32": ([1, 1 + 2**-23, 3, 5], [1 + 2**-23, 1 + 2**-22, -1, 6], np.float32),
}
for name, (row0, row1, dtype) in ROWS.items():
    np.save(f"{sys.argv[1]}/rows_{name}.npy", np.array([row0, row1], dtype=dtype))
