"""DistributedModel's options: the keywords, their defaults, help and conversion, all read
from the core's one option table (include/poseidon/option_table.h; `poseidon train --help`
shows the same rows as flags), and the choices only Python has (mode, the server-side SGD)."""
import difflib
import inspect
import textwrap

import torch

from . import _C
from . import runtime

SCHEMES = ("auto", "ps", "sfb", "allreduce")
MODES = ("auto", "server", "gradient")
# The table's rows Python shows: keyword -> {kind, group, default, help, server_only}.
KEYWORDS = {row["name"]: row for row in _C.option_table() if row["python"]}
# Options only the servers have: mode "auto" then chooses "server" up front.
SERVER_ONLY = tuple(name for name, row in KEYWORDS.items() if row["server_only"])


def keyword_values(given, owner):
    """Every option keyword's value: the table's default unless `given`; a keyword no option has
    is a TypeError naming the closest one, as Python's own."""
    for name in given:
        if name not in KEYWORDS:
            close = difflib.get_close_matches(name, KEYWORDS, 1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise TypeError(f"{owner}() got an unexpected keyword argument '{name}'{hint}")
    return {name: given.get(name, row["default"]) for name, row in KEYWORDS.items()}


def with_keywords(function):
    """`function`'s signature with the table's keywords in place of its **options (help(),
    IDEs and inspect show them with their defaults)."""
    sig = inspect.signature(function)
    params = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    params += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=row["default"])
               for name, row in KEYWORDS.items()]
    function.__signature__ = sig.replace(parameters=params)
    return function


def keywords_doc():
    """The option keywords' part of DistributedModel's docstring, by group."""
    lines = []
    for group in dict.fromkeys(row["group"] for row in KEYWORDS.values()):
        lines.append(f"{group} options:")
        for name, row in KEYWORDS.items():
            if row["group"] == group:
                lines += textwrap.wrap(f"{name}={row['default']!r}: {row['help']}", 92, initial_indent="    ",
                                       subsequent_indent="        ")
    return "\n".join(lines)


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


def core_options(a, mode, sgd):
    """The core's Options for the keyword values `a` (keyword_values, with profile and
    stack_rate) in `mode`; `sgd`: (lr, momentum, weight_decay) the servers apply in server mode."""
    o = _C.Options()
    if mode == "server":
        o.lr, o.momentum, o.weight_decay = sgd
    o.gradient_mode = mode == "gradient"
    for name in KEYWORDS:
        o.set(name, a[name])  # the table's parser, as the CLI's flags: a bad value names its keyword
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
