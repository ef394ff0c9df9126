from inferlab.engine.engine_old import *  # noqa
from inferlab.engine.engine_old import STOP_REASONS, Backend, Engine, StreamEvent, held_back  # noqa
