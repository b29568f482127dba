"""DistributedModel's options: the choices Python checks itself, the core's defaults the
keywords take, and the conversion of the keywords into the core's Options (which the core
validates, naming each bad option as its keyword)."""
import datetime
import operator

import torch

from . import _C
from . import runtime

SCHEMES = ("auto", "ps", "sfb", "allreduce")
MODES = ("auto", "server", "gradient")
CORE = _C.Options()  # the core's defaults, the keywords' defaults where they are the same option
OPTION_KEYS = ("scheme", "cost_model", "buffers", "backward_passes_per_step", "fusion_bytes", "kvstore",
               "kv_pair_bytes", "staleness", "send_order", "max_bandwidth", "devices_per_node", "straggler_timeout",
               "timeout", "timeline", "wfbp", "overlap_step", "bandwidth", "gemm_flops", "lr_decay_iterations", "profile",
               "stack_rate", "wire", "error_feedback")
SERVER_ONLY = ("staleness", "straggler_timeout", "lr_decay_iterations", "overlap_step")  # options: mode "server"


def server_sgd(optimizer):
    """(lr, momentum, weight_decay) if server-side SGD can run this optimizer, else why not."""
    if type(optimizer) is not torch.optim.SGD:
        return None, f"{type(optimizer).__name__} is not torch.optim.SGD"
    keys = ("lr", "momentum", "weight_decay")
    first = optimizer.param_groups[0]
    for g in optimizer.param_groups:
        if g.get("nesterov") or g.get("dampening", 0) != 0 or g.get("maximize"):
            return None, "nesterov, dampening or maximize is set"
        if any(g[k] != first[k] for k in keys):
            return None, "parameter groups differ in lr, momentum or weight_decay"
    return tuple(float(first[k]) for k in keys), ""


def devices_per_node(value):
    """The core's devices_per_node: 0 for "host", else a whole number of ranks, at least 1
    (parsed by the core, as the CLI's --devices-per-node)."""
    if isinstance(value, bool) or not isinstance(value, (str, int)) and not hasattr(value, "__index__"):
        raise ValueError(f"devices_per_node={value!r}: give a number of ranks per node (1: flat) or 'host'")
    return _C.parse_devices_per_node(value if isinstance(value, str) else str(operator.index(value)))


def core_options(a, mode, sgd):
    """The core's Options for the keywords `a` in `mode`; `sgd`: (lr, momentum, weight_decay)
    the servers apply in server mode."""
    o = _C.Options()
    if mode == "server":
        o.lr, o.momentum, o.weight_decay = sgd
    o.gradient_mode = mode == "gradient"
    o.scheme, o.cost_model, o.buffers = a["scheme"], a["cost_model"], a["buffers"]
    o.backward_passes_per_step = int(a["backward_passes_per_step"])
    o.fusion_bytes, o.kvstore, o.kv_pair_bytes = int(a["fusion_bytes"]), a["kvstore"], int(a["kv_pair_bytes"])
    o.staleness = int(a["staleness"])
    o.send_order = a["send_order"]
    o.wire = a["wire"]
    o.error_feedback = bool(a["error_feedback"])
    o.max_bandwidth = rate(a["max_bandwidth"], "max_bandwidth")
    o.devices_per_node = devices_per_node(a["devices_per_node"])
    o.straggler_timeout = datetime.timedelta(seconds=float(a["straggler_timeout"]))
    o.timeout = datetime.timedelta(seconds=float(a["timeout"]))
    o.timeline, o.wfbp, o.overlap_step = bool(a["timeline"]), bool(a["wfbp"]), bool(a["overlap_step"])
    o.bandwidth, o.gemm_flops = float(a["bandwidth"]), float(a["gemm_flops"])
    o.lr_decay_iterations = int(a["lr_decay_iterations"])
    o.agreement = f"python mode={mode}"
    if a["cost_model"] == "schedule" and a["profile"] is not None:
        o.use_schedule_profile(str(a["profile"]), rate(a["stack_rate"], "stack_rate"), runtime.local_size(),
                               runtime.rank() == 0)
    _C.validate_options(o)  # a bad option fails here, named as its keyword, before the first forward
    return o


def rate(value, field):
    """Bytes per second from "500MB", "1gbit" or a number; "0", 0 and None are none (the
    core's parsing, as the CLI's flags)."""
    return _C.parse_rate_or_off(value.strip() if isinstance(value, str) else repr(float(value or 0)), field)


def check_choice(what, value, choices):
    if value not in choices:
        raise ValueError(f"{what}={value!r}: use one of {', '.join(choices)}")
