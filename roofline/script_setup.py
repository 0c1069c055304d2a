"""The scheduler settings a benchmark script gave its server, read for one run.

A shell script that launches a serving engine often sets its scheduler by the run: InferenceX's
TensorRT-LLM script for Llama 3.1 70B, for example, writes ``batch_wait_timeout_iters: 20`` into
the server's config only ``if [[ "$ISL" == "1024" && "$OSL" == "1024" && ${TP} -lt 8 ]]``. So a
script is kept as its *digest*, the lines that decide a setting (``if``/``elif``/``else``/``fi``,
plain assignments, and the lines that name one of ``KNOBS`` or ``FLAGS``), and ``evaluate`` runs that digest
for a run's variables (``ISL``, ``OSL``, ``TP``, ``CONC``, ...) as the shell would: the branches
its tests take, the variables its assignments and ``$(( ))`` arithmetic give, and the settings
the taken branches name.

It is a reader, not a shell: a test or value that needs a variable the run does not give (an
environment the workflow set, a file, a command's output) is *unknown*, and so is every setting
under it; a setting named twice with different values is unknown too. Unknown settings are left
out, and the engine's default stands.
"""

from __future__ import annotations

import ast
import operator
import re

# What each knob is called in the scripts (CLI flags and YAML keys), by roofline's name for it.
KNOBS = {
    "max_num_batched_tokens": ("max-num-batched-tokens", "max_num_batched_tokens"),  # vLLM
    "chunked_prefill_size": ("chunked-prefill-size",),  # SGLang
    "scheduler_recv_interval": ("scheduler-recv-interval",),  # SGLang
    "max_num_tokens": ("max_num_tokens",),  # TensorRT-LLM
    "batch_wait_timeout_iters": ("batch_wait_timeout_iters",),  # TensorRT-LLM
    "batch_wait_max_tokens_ratio": ("batch_wait_max_tokens_ratio",),  # TensorRT-LLM
    # The MoE kernels: TensorRT-LLM's moe_config.backend (kept by ``digest`` as moe_backend; older
    # configs' top-level moe_backend), SGLang's --moe-runner-backend, vLLM's --moe-backend.
    "moe_backend": ("moe_backend", "moe-runner-backend", "moe-backend"),
    # Expert parallelism: TensorRT-LLM's --ep_size (and moe_expert_parallel_size), SGLang's --ep-size.
    "ep_size": ("ep_size", "ep-size", "expert-parallel-size", "moe_expert_parallel_size"),
    "enable_attention_dp": ("enable_attention_dp",),  # TensorRT-LLM: attention data parallel
    # The sequences a step may run (the rest wait) and which steps replay a CUDA graph: vLLM's
    # sequence cap (its default largest graph is twice it, at most 512 tokens) and its largest
    # graph (max_cudagraph_capture_size; cuda_graph_sizes with one value before it); TensorRT-LLM's
    # torch_compile_config.enable_piecewise_cuda_graph.
    "max_num_seqs": ("max-num-seqs", "max_num_seqs"),
    "cudagraph_capture_size": ("max-cudagraph-capture-size", "cuda-graph-sizes"),
    "enable_piecewise_cuda_graph": ("enable_piecewise_cuda_graph",),
}
# Flags that set a knob by being there, with the value they set: SGLang's older names, which its
# --moe-runner-backend and --ep-size later took over (InferenceX's scripts switched on 2025-11-10).
FLAGS = {
    "enable-ep-moe": ("ep_size", "$TP"),  # SGLang: the experts split over the TP group by EP
    "enable-flashinfer-trtllm-moe": ("moe_backend", "flashinfer_trtllm"),  # SGLang
    "enable-flashinfer-cutlass-moe": ("moe_backend", "flashinfer_cutlass"),  # SGLang
}
_FLAG = re.compile(r"--(" + "|".join(map(re.escape, FLAGS)) + r")(?=[\s\\\"';]|$)")
_NAMES = {name: knob for knob, names in KNOBS.items() for name in names}
_KNOB = re.compile(
    r"(?:--|^\s*)("
    + "|".join(map(re.escape, _NAMES))
    + r")(?:\s*[=:]\s*|\s+)(\"[^\"]*\"|\$\(\((?:[^()]|\([^()]*\))*\)\)|[^\s\\\"]+)"
)
_ASSIGN = re.compile(r"^\s*(?:export\s+)?([A-Za-z_]\w*)=(\$\(\(.*\)\)|\"[^\"]*\"|'[^']*'|[^\s;]*)\s*(?:#.*)?$")
_BRANCH = re.compile(r"^\s*(if|elif|else|fi)\b(.*)$")
_VAR = re.compile(r"\$\{(\w+)(?::-([^}$`]*))?\}|\$(\w+)")
UNKNOWN = None


# A setting inside a JSON value (vLLM's --compilation-config, whole or split over a variable's
# quoted lines): its key as roofline names it, and its string value.
JSON_KNOBS = {"cudagraph_mode": "cudagraph_mode"}  # vLLM: which steps replay a CUDA graph
_JSON_KNOB = re.compile(r'"(' + "|".join(map(re.escape, JSON_KNOBS)) + r')"\s*:\s*"(\w+)"')


_LOOP = re.compile(r"^(case|for|while|until|select)\b|^(esac|done)\b")
_GUARDED = re.compile(r"^(\[\[?.*?\]?\])\s*(&&|\|\|)\s*(.+)$")


def digest(text: str) -> list[str]:
    """The lines of a script that decide a setting, in order (comments dropped); a body line that
    closes its ``if`` (``X=1; fi``) is kept as the body and a ``fi``; the ``backend:`` of a YAML
    ``moe_config:`` block is kept as ``moe_backend:`` (other blocks name other backends)."""
    kept = []
    moe_block: list[int | None] | None = None  # an open ``moe_config:`` block: [its indent, its keys' indent]
    for line in text.split("\n"):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        yaml = re.sub(r"\s+#.*$", "", stripped)  # a YAML line less its comment
        if moe_block is not None and indent <= moe_block[0]:
            moe_block = None
        if yaml == "moe_config:":
            moe_block = [indent, None]
            continue
        if moe_block is not None:  # a key of the block, or deeper: not a top-level setting
            if moe_block[1] is None:
                moe_block[1] = indent
            backend = re.fullmatch(r"backend:\s*(\S+)", yaml)
            if backend and indent == moe_block[1]:
                kept.append(f"moe_backend: {backend[1]}")
            continue
        closing = re.fullmatch(r"(.*?);\s*fi", stripped)
        if closing and not _BRANCH.match(stripped):
            kept += [closing[1].strip(), "fi"]
        elif _BRANCH.match(stripped) or _LOOP.match(stripped) or _GUARDED.match(stripped):
            kept.append(stripped)
        elif _ASSIGN.match(stripped) or _KNOB.search(line) or _FLAG.search(line) or _JSON_KNOB.search(line):
            kept.append(stripped)
    return kept


def _value(word: str, env: dict[str, str | None]) -> str | None:
    """A shell word's value: quotes removed, ``$VAR``, ``${VAR}``, ``${VAR:-literal}`` and a
    whole-word ``$(( ))`` replaced; None where it needs a variable ``env`` does not know or an
    expansion this reader does not follow (a command's output, ``${VAR,,}``, ``${VAR#x}``, ...)."""
    word = word.strip()
    if len(word) >= 2 and word[0] == word[-1] == "'":
        return word[1:-1]  # single quotes: literal
    if len(word) >= 2 and word[0] == word[-1] == '"':
        word = word[1:-1]
    arith = re.fullmatch(r"\$\(\((.*)\)\)", word)
    if arith:
        return _arithmetic(arith[1], env)
    if "$(" in word or "`" in word or "$" in _VAR.sub("", word):
        return UNKNOWN
    missing = False

    def sub(m: re.Match) -> str:
        nonlocal missing
        name, default = m[1] or m[3], m[2]
        known = env.get(name)
        if known is None:  # a variable the run does not give (the workflow may set it)
            missing = True
            return ""
        return default if default is not None and known == "" else known

    out = _VAR.sub(sub, word)
    return UNKNOWN if missing else out


def _tdiv(a: int, b: int) -> int:
    """Bash's integer division: truncated toward zero (C's), not floored."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: _tdiv,
    ast.Mod: lambda a, b: a - b * _tdiv(a, b),
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}


def _arithmetic(expr: str, env: dict[str, str | None]) -> str | None:
    """Bash integer arithmetic (+ - * / % and comparisons, one ``a ? b : c``) over known
    variables; None for anything else (bases, shifts, nested ternaries, assignments)."""
    if not re.fullmatch(r"[\w\s+\-*/%()<>=!?:${}]*", expr) or expr.count("?") > 1:
        return UNKNOWN
    ternary = re.fullmatch(r"([^?]+)\?([^:]+):(.+)", expr)
    if ternary:
        test = _arithmetic(ternary[1], env)
        return UNKNOWN if test is None else _arithmetic(ternary[2] if test != "0" else ternary[3], env)
    if "?" in expr or ":" in expr:
        return UNKNOWN
    names = set(re.findall(r"[A-Za-z_]\w*", expr.replace("$", "")))
    values = {n: env.get(n) for n in names}
    if any(v is None or not re.fullmatch(r"-?\d+", v) for v in values.values()):
        return UNKNOWN
    text = re.sub(r"\$\{?(\w+)\}?", r"\1", expr)
    try:
        tree = ast.parse(text.strip(), mode="eval")
        return str(int(_eval(tree.body, {n: int(v) for n, v in values.items()})))
    except (SyntaxError, ValueError, ZeroDivisionError, KeyError, RecursionError, OverflowError):
        return UNKNOWN


def _eval(node: ast.AST, names: dict[str, int]) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name):
        return names[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, names)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_eval(node.left, names), _eval(node.right, names))
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _OPS:
        return int(_OPS[type(node.ops[0])](_eval(node.left, names), _eval(node.comparators[0], names)))
    raise ValueError(f"not bash arithmetic: {ast.dump(node)}")


# --- tests: [[ ... ]], [ ... ], &&, ||, !, -n, -z, ==, =, !=, -eq, -ne, -lt, -le, -gt, -ge ---
_NUMERIC = {"-eq": operator.eq, "-ne": operator.ne, "-lt": operator.lt, "-le": operator.le, "-gt": operator.gt}
_NUMERIC["-ge"] = operator.ge
_TOKEN = re.compile(r"\[\[|\]\]|\[|\]|&&|\|\||!=|==|=|!|\(|\)|\"[^\"]*\"|'[^']*'|[^\s\[\]()&|!=\"']+")


def _and(a: bool | None, b: bool | None) -> bool | None:
    return False if a is False or b is False else (None if a is None or b is None else True)


def _or(a: bool | None, b: bool | None) -> bool | None:
    return True if a is True or b is True else (None if a is None or b is None else False)


def _not(a: bool | None) -> bool | None:
    return None if a is None else not a


def condition(text: str, env: dict[str, str | None]) -> bool | None:
    """A shell test's truth for ``env``; None where it needs an unknown variable or is not one
    this reader understands."""
    tokens = _TOKEN.findall(text.replace("; then", "").replace(";then", "").removesuffix("then"))
    if not any(t in ("[[", "[") for t in tokens):
        return None  # a command's exit status (`if grep ...`, `if $FLAG`), not a test
    tokens = ["(" if t in ("[[", "[") else ")" if t in ("]]", "]") else t for t in tokens]
    pos = 0

    def peek() -> str | None:
        return tokens[pos] if pos < len(tokens) else None

    def take() -> str:
        nonlocal pos
        pos += 1
        return tokens[pos - 1]

    def either() -> bool | None:
        out = both()
        while peek() == "||":
            take()
            out = _or(out, both())
        return out

    def both() -> bool | None:
        out = unary()
        while peek() == "&&":
            take()
            out = _and(out, unary())
        return out

    def unary() -> bool | None:
        if peek() == "!":
            take()
            return _not(unary())
        if peek() == "(":
            take()
            out = either()
            if take() != ")":
                raise ValueError("unbalanced test")
            return out
        return primary()

    def primary() -> bool | None:
        word = take()
        if word in ("-n", "-z"):
            value = _value(take(), env)
            return None if value is None else (bool(value) if word == "-n" else not value)
        if peek() in ("==", "=", "!=") or peek() in _NUMERIC:
            op, right = take(), _value(take(), env)
            left = _value(word, env)
            if left is None or right is None:
                return None
            if op in _NUMERIC:
                if not (re.fullmatch(r"-?\d+", left) and re.fullmatch(r"-?\d+", right)):
                    return None
                return _NUMERIC[op](int(left), int(right))
            if "*" in right or "?" in right:  # a glob pattern
                return None
            return (left == right) != (op == "!=")
        value = _value(word, env)
        return None if value is None else bool(value)

    try:
        result = either()
        return result if pos == len(tokens) else None
    except (IndexError, ValueError):
        return None


def evaluate(lines: list[str], env: dict[str, str]) -> dict[str, str | None]:
    """The settings a script's digest gives a run with variables ``env``: each knob it names in a
    branch the run takes, by roofline's name; None for a knob it names but that cannot be told
    (an unknown test or value above it, a loop or ``case`` around it, or two different values)."""
    env = dict(env)
    frames: list[list] = []  # [parent active, any branch taken so far, this branch active]
    active: bool | None = True
    found: dict[str, str | None] = {}

    def knob(name: str, value: str | None) -> None:
        key = _NAMES.get(name) or JSON_KNOBS.get(name) or FLAGS[name][0]
        found[key] = UNKNOWN if key in found and found[key] != value else value

    def statement(line: str, on: bool | None) -> None:
        """One simple command run when ``on`` (None: perhaps)."""
        if on is False:
            return
        guarded = _GUARDED.match(line)
        if guarded:  # [[ test ]] && command, [[ test ]] || command
            c = condition(guarded[1], env)
            statement(guarded[3], _and(on, c if guarded[2] == "&&" else _not(c)))
            return
        assign = _ASSIGN.match(line)
        if assign:
            env[assign[1]] = _value(assign[2], env) if on else UNKNOWN
            # A setting kept in a variable: where it goes is not followed.
            for name in [n for n, _ in _KNOB.findall(line) + _JSON_KNOB.findall(line)] + _FLAG.findall(line):
                knob(name, UNKNOWN)
            return
        for name, word in _KNOB.findall(line):
            knob(name, _value(word, env) if on else UNKNOWN)
        for name, word in _JSON_KNOB.findall(line):  # a JSON string holds no shell expansion
            knob(name, word if on else UNKNOWN)
        for name in _FLAG.findall(line):
            knob(name, _value(FLAGS[name][1], env) if on else UNKNOWN)

    for line in lines:
        loop = _LOOP.match(line)
        if loop:  # a loop or case: what runs inside, and how often, is not followed
            if loop[1]:
                frames.append([active, None, UNKNOWN if active is not False else False])
            elif frames:
                frames.pop()
            active = frames[-1][2] if frames else True
            continue
        branch = _BRANCH.match(line)
        if branch:
            word, rest = branch[1], branch[2]
            if word == "if":
                one_line = re.fullmatch(r"(.*?);?\s*then\s+(.*?);?\s*fi\s*", rest)
                if one_line:  # if test; then command; fi
                    for command in one_line[2].split(";"):
                        statement(command.strip(), _and(active, condition(one_line[1], env)))
                    continue
                taken = condition(rest, env)
                frames.append([active, taken, _and(active, taken)])
            elif frames and word == "elif":
                parent, before, _ = frames[-1]
                now = _and(_not(before), condition(rest, env))
                frames[-1] = [parent, _or(before, now), _and(parent, now)]
            elif frames and word == "else":
                parent, before, _ = frames[-1]
                frames[-1] = [parent, True, _and(parent, _not(before))]
            elif frames and word == "fi":
                frames.pop()
            active = frames[-1][2] if frames else True
            continue
        statement(line, active)
    return found
