from inferlab.sampling.rules_old import *  # noqa
from inferlab.sampling.rules_old import _as_batch, _keep_at_least  # noqa
