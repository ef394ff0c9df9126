"""Print the processor this machine has, in one line, before anything is installed (CI's first line).

    python3 scripts/processor.py

Machines of the book's kind come with an AMD EPYC or an Intel Xeon, and timings, the matrix
kernels a library picks and the last bits of floating-point results depend on which. This loads
inferlab/cpuinfo.py by path (it needs only the standard library), so it runs with any Python 3.
"""
import importlib.util
from pathlib import Path

spec = importlib.util.spec_from_file_location("cpuinfo", Path(__file__).resolve().parent.parent / "inferlab" / "cpuinfo.py")
cpuinfo = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cpuinfo)
print("processor:", cpuinfo.describe())
