"""Settings for every pytest run, and for `pytest --nbval` the environment of the published outputs.

The kernels that nbval starts inherit this process's environment, so these lines fix, for every
chapter: the reference model of the published outputs (GPT-2 would give other tokens where it
loads), figures rendered as static HTML, and no progress bars on stderr.
"""
import os

os.environ["INFERLAB_MODEL"] = "smollm2-135m"
os.environ["INFERLAB_STATIC_PLOTS"] = "1"
os.environ["TQDM_DISABLE"] = "1"
