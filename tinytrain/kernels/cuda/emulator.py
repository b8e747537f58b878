"""Run the CUDA kernels of ``tinytrain/kernels/cuda/*.cu`` on the CPU, thread by thread.

There is no GPU on the CI machine (nor, often, on a learner's laptop), yet a wrong index
in a kernel is the bug that matters most. So the ``.cu`` files are written in a small,
disciplined subset of CUDA C, and this module *translates each kernel's source into
Python* and runs it over an emulated grid: every block, every thread, with ``blockIdx.x``,
``threadIdx.x``, ``blockDim.x``, ``gridDim.x`` set as on the GPU. What runs is the actual
source, not a hand-written twin that could drift from it.

The subset: functions ``extern "C" __global__ void`` (kernels) and ``__device__`` helpers;
scalar types ``real`` (float or double) and ``index_t`` (int or long long), both chosen per
compilation, ``float``, ``double``,
``int``, ``unsigned int``, ``long long`` (or ``ptrdiff_t``), ``unsigned long long`` (or
``size_t``), ``short``, ``bool``; pointer parameters indexed
as ``p[i]`` (no pointer arithmetic); ``__shared__`` arrays; ``if``/``else``, ``for``,
``while``, ``break``, ``continue``, ``return``; ``__syncthreads()``; ``atomicAdd(&p[i], v)``;
casts; ``exp log sqrt fabs fmax fmin min max isnan``; one-dimensional grids; ``#pragma``
lines and the ``#ifndef TINYTRAIN_TYPES`` block of default typedefs (both skipped: the
emulator chooses ``real`` and ``index_t`` itself). Anything else is a
:class:`TranslationError` naming the line: ``auto``, ``do ... while``, ``switch``,
``long``, structs, templates and pointer arithmetic, for instance.

What the emulation checks, beyond the values:

* C semantics of integers: ``/`` and ``%`` truncate toward zero (Python's floor
  differently for negative numbers), ``int`` and ``unsigned int`` arithmetic wraps at
  32 bits, ``unsigned long long`` at 64 bits, comparisons between signed and unsigned
  convert as C does;
* every array access is bounds-checked, and a thread that writes an element another
  thread of the same launch reads or writes is a race (in shared memory: between two
  ``__syncthreads()``), reported with both threads;
* ``__syncthreads()`` runs the threads of a block in phases; a thread that finishes while
  others wait at a barrier is reported;
* kernel arguments must match the parameters: dtype of each array, C-contiguity, and the
  exact C type of each scalar (``np.int64`` for ``long long``, ...), the mistakes that on
  a GPU silently produce garbage;
* unwritten outputs stay NaN (see :data:`POISON`), so a skipped element shows.

What it does not model: warps, timing, memory coalescing, floating-point contraction and
the GPU's math library (results agree to rounding, not bit for bit). It is slow (about a
microsecond per C operation): use tiny shapes.

:func:`run_plan` executes the same launch plans as the GPU (``plans.py``): kernels here,
and the cuBLAS GEMMs in NumPy with cuBLAS's row/column-major conventions.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

SOURCE_DIR = Path(__file__).resolve().parent

__all__ = [
    "Emulated",
    "EmulatorError",
    "Kernel",
    "Module",
    "TranslationError",
    "emulated_kernels",
    "launch",
    "load",
    "run_plan",
]


class TranslationError(ValueError):
    """The source uses something outside the subset (the message names file and line)."""


class EmulatorError(RuntimeError):
    """A kernel did something a GPU would not forgive: out of bounds, a race, bad arguments."""


# =========================================================================== types
#
# C types are tracked while translating so that every operation gets C's semantics:
# "i32" int, "u32" unsigned int, "i64" long long, "u64" unsigned long long (size_t),
# "i16" short, "bool", "f32", "f64".

INT_TYPES = ("bool", "i16", "i32", "u32", "i64", "u64")
FLOAT_TYPES = ("f32", "f64")
DTYPES = {"f32": np.float32, "f64": np.float64, "i64": np.int64, "i32": np.int32,
          "u32": np.uint32, "i16": np.int16, "bool": np.bool_, "u64": np.uint64}
# The NumPy scalar type a kernel parameter of each C type must receive.
SCALAR_ARG = {"i64": np.int64, "i32": np.int32, "u32": np.uint32, "i16": np.int16,
              "f32": np.float32, "f64": np.float64, "bool": np.bool_, "u64": np.uint64}
_RANK = {"bool": 0, "i16": 1, "i32": 2, "u32": 3, "i64": 4, "u64": 5}
# Integer conversions that keep every value (no wrapping needed).
_FITS = {("bool", t) for t in ("i16", "i32", "u32", "i64", "u64")} | {
    ("i16", "i32"), ("i16", "i64"), ("i32", "i64"), ("u32", "i64"), ("u32", "u64")}


def _common(a: str, b: str) -> str:
    """C's usual arithmetic conversions (for the types of this subset)."""
    if a.startswith("*") or b.startswith("*"):
        raise TranslationError("pointer arithmetic is not in the subset")
    if a in FLOAT_TYPES or b in FLOAT_TYPES:
        return "f64" if "f64" in (a, b) else "f32"
    a, b = ("i32" if t in ("bool", "i16") else t for t in (a, b))
    return a if _RANK[a] >= _RANK[b] else b


# =========================================================================== tokens

_TOKEN = re.compile(
    r"""(?P<space>\s+|//[^\n]*|/\*.*?\*/)
      |(?P<num>0[xX][0-9a-fA-F]+[uUlL]*|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[fFuUlL]*)
      |(?P<str>"[^"\n]*")
      |(?P<id>[A-Za-z_]\w*)
      |(?P<op><<=|>>=|\+\+|--|&&|\|\||<<|>>|<=|>=|==|!=|\+=|-=|\*=|/=|%=|&=|\|=|\^=
             |[-+*/%<>=!&|^~?:;,.(){}\[\]])""",
    re.S | re.X,
)


@dataclass
class _Tok:
    kind: str
    text: str
    line: int


def _tokenize(src: str, filename: str) -> list[_Tok]:
    toks, pos, line = [], 0, 1
    while pos < len(src):
        if src.startswith("#ifndef TINYTRAIN_TYPES", pos):
            # the defaults for compiling a file alone: the emulator, like the launcher,
            # chooses real and index_t itself
            end = src.find("\n", src.index("#endif", pos))
            line += src.count("\n", pos, end)
            pos = end
            continue
        if src[pos] == "#":  # only '#pragma' lines (e.g. unroll hints) are accepted, and ignored
            end = src.find("\n", pos)
            end = len(src) if end < 0 else end
            if not src[pos:end].startswith("#pragma"):
                raise TranslationError(f"{filename}:{line}: preprocessor lines are not "
                                       f"supported: {src[pos:end]!r}")
            pos = end
            continue
        m = _TOKEN.match(src, pos)
        if not m:
            raise TranslationError(f"{filename}:{line}: cannot read {src[pos:pos + 20]!r}")
        if m.lastgroup != "space":
            toks.append(_Tok(m.lastgroup, m.group(), line))
        line += m.group().count("\n")
        pos = m.end()
    toks.append(_Tok("eof", "", line))
    return toks


# =========================================================================== translator

_TYPE_WORDS = {"real", "index_t", "float", "double", "int", "unsigned", "long", "short", "bool",
               "void", "const", "signed", "size_t", "ptrdiff_t"}
# C words a learner may reach for that the subset leaves out: refused with a pointer to it.
_NOT_IN_SUBSET = {"auto", "do", "switch", "case", "goto", "struct", "union", "enum", "typedef",
                  "template", "sizeof"}
_BUILTIN_VARS = {"threadIdx", "blockIdx", "blockDim", "gridDim"}
_MATH = {"exp": "_np.exp", "expf": "_np.exp", "log": "_np.log", "logf": "_np.log",
         "sqrt": "_np.sqrt", "sqrtf": "_np.sqrt", "fabs": "abs", "fabsf": "abs",
         "fmax": "_np.fmax", "fmaxf": "_np.fmax", "fmin": "_np.fmin", "fminf": "_np.fmin"}
_BINARY_PRECEDENCE = {"||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6, "<": 7,
                      ">": 7, "<=": 7, ">=": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10,
                      "/": 10, "%": 10}
_ASSIGN = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>="}


@dataclass
class Param:
    """A function parameter: its C type, and whether it is a pointer (and to const)."""

    name: str
    ctype: str
    pointer: bool
    const: bool


@dataclass
class _Func:
    name: str
    kind: str  # "kernel" or "device"
    ret: str
    params: list[Param]
    lines: list[str] = field(default_factory=list)
    syncs: bool = False


class _Translator:
    """Recursive descent over the token list, emitting Python source while tracking types."""

    def __init__(self, src: str, filename: str, real: str, index: str = "i64") -> None:
        self.toks = _tokenize(src, filename)
        self.pos = 0
        self.filename = filename
        self.real = real
        self.index = index
        self.funcs: dict[str, _Func] = {}
        self.scopes: list[dict[str, tuple[str, bool]]] = []  # name -> (ctype, is_array)
        self.consts: set[str] = set()
        self.loop_steps: list[list[str] | None] = []  # for-loop steps, for `continue`
        self.func: _Func | None = None

    # ---------------------------------------------------------------- token helpers

    def peek(self, k: int = 0) -> _Tok:
        return self.toks[self.pos + k]

    def next(self) -> _Tok:
        tok = self.toks[self.pos]
        self.pos += 1
        return tok

    def error(self, msg: str, tok: _Tok | None = None) -> TranslationError:
        tok = tok or self.peek()
        return TranslationError(f"{self.filename}:{tok.line}: {msg} (at {tok.text!r})")

    def accept(self, text: str) -> bool:
        if self.peek().text == text:
            self.pos += 1
            return True
        return False

    def expect(self, text: str) -> _Tok:
        if self.peek().text != text:
            raise self.error(f"expected {text!r}")
        return self.next()

    # ---------------------------------------------------------------- types and names

    def at_type(self) -> bool:
        return self.peek().text in _TYPE_WORDS

    def parse_type(self) -> str:
        words = []
        while self.peek().text in _TYPE_WORDS:
            words.append(self.next().text)
        words = [w for w in words if w not in ("const", "signed")]
        key = " ".join(words)
        table = {"real": self.real, "index_t": self.index, "float": "f32", "double": "f64",
                 "int": "i32", "unsigned": "u32", "unsigned int": "u32", "long long": "i64",
                 "long long int": "i64", "ptrdiff_t": "i64", "unsigned long long": "u64",
                 "unsigned long long int": "u64", "size_t": "u64", "short": "i16",
                 "bool": "bool", "void": "void"}
        if key not in table:
            raise self.error(f"type {key!r} is not in the subset")
        return table[key]

    def lookup(self, name: str, tok: _Tok) -> tuple[str, bool]:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        raise self.error(f"unknown name {name!r}", tok)

    def declare(self, name: str, ctype: str, array: bool = False) -> None:
        self.scopes[-1][name] = (ctype, array)

    # ---------------------------------------------------------------- conversions

    def convert(self, code: str, src: str, dst: str) -> str:
        """Python code for the C conversion of a value of type ``src`` to ``dst``."""
        if src.startswith("*") or dst.startswith("*"):
            raise self.error("pointers can only be indexed or passed on (no pointer arithmetic)")
        if src == dst:
            return code
        if dst in FLOAT_TYPES:
            return f"_{dst}({code})"
        if dst == "bool":
            return f"bool({code})"
        if src in FLOAT_TYPES:
            code = f"_trunc({code})"
        elif (src, dst) in _FITS:
            return code
        return code if dst == "i64" and src != "u64" else f"_{dst}({code})"

    # ---------------------------------------------------------------- expressions

    def expr(self) -> tuple[str, str]:
        cond = self.binary(1)
        if not self.accept("?"):
            return cond
        a = self.expr()
        self.expect(":")
        b = self.expr()
        t = _common(a[1], b[1])
        return f"({self.convert(a[0], a[1], t)} if {cond[0]} else {self.convert(b[0], b[1], t)})", t

    def binary(self, min_prec: int) -> tuple[str, str]:
        left = self.unary()
        while True:
            op = self.peek().text
            prec = _BINARY_PRECEDENCE.get(op)
            if self.peek().kind != "op" or prec is None or prec < min_prec:
                return left
            self.next()
            right = self.binary(prec + 1)
            left = self.apply_binary(op, left, right)

    def apply_binary(self, op: str, left: tuple[str, str],
                     right: tuple[str, str]) -> tuple[str, str]:
        (a, ta), (b, tb) = left, right
        if op in ("&&", "||"):
            return f"({a} {'and' if op == '&&' else 'or'} {b})", "bool"
        if op in ("<<", ">>"):
            t = _common(ta, ta)
            if t in FLOAT_TYPES:
                raise self.error("shift of a floating-point value")
            code = f"({self.convert(a, ta, t)} {op} {b})"
            return (f"_{t}({code})" if op == "<<" and t != "i64" else code), t
        t = _common(ta, tb)
        a, b = self.convert(a, ta, t), self.convert(b, tb, t)
        if op in ("==", "!=", "<", ">", "<=", ">="):
            return f"({a} {op} {b})", "bool"
        if t in FLOAT_TYPES:
            if op in ("%", "&", "|", "^"):
                raise self.error(f"operator {op!r} on floating-point values")
            return f"({a} {op} {b})", t
        if op == "/":
            code = f"_div({a}, {b})"
        elif op == "%":
            code = f"_mod({a}, {b})"
        else:
            code = f"({a} {op} {b})"
        return (code if t == "i64" else f"_{t}({code})"), t

    def unary(self) -> tuple[str, str]:
        tok = self.peek()
        if tok.text in ("-", "+", "!", "~"):
            self.next()
            code, t = self.unary()
            if tok.text == "!":
                return f"(not {code})", "bool"
            if tok.text == "+":
                return code, t
            t = _common(t, t)
            code = f"({tok.text}{self.convert(code, t, t)})"
            return (code if t in FLOAT_TYPES or t == "i64" else f"_{t}({code})"), t
        if tok.text == "(" and self.peek(1).text in _TYPE_WORDS:  # a cast
            self.next()
            t = self.parse_type()
            self.expect(")")
            code, src = self.unary()
            return self.convert(code, src, t), t
        return self.postfix()

    def postfix(self) -> tuple[str, str]:
        tok = self.next()
        if tok.kind == "num":
            return self.number(tok)
        if tok.text == "(":
            code, t = self.expr()
            self.expect(")")
            return f"({code})", t
        if tok.kind != "id":
            raise self.error("expected an expression", tok)
        name = tok.text
        if name in _NOT_IN_SUBSET:
            raise self.error(f"{name!r} is not in the subset of CUDA C that the emulator runs "
                             f"(the docstring of tinytrain/kernels/cuda/emulator.py lists it)",
                             tok)
        if name in _BUILTIN_VARS:
            self.expect(".")
            axis = self.next()
            if axis.text != "x":
                raise self.error("only one-dimensional grids (.x) are emulated", axis)
            if self.func and self.func.kind != "kernel":
                raise self.error("device functions take thread indices as arguments", tok)
            return f"{name}_x", "u32"
        if self.peek().text == "(":
            return self.call(tok)
        ctype, array = self.lookup(name, tok)
        if self.accept("["):
            index, it = self.expr()
            self.expect("]")
            if it not in INT_TYPES:
                raise self.error(f"array index of type {it}", tok)
            return f"{name}[{index}]", ctype
        return (name, f"*{ctype}") if array else (name, ctype)

    def number(self, tok: _Tok) -> tuple[str, str]:
        text = tok.text.lower()
        if text.startswith("0x"):
            digits = text.rstrip("ul")
            suffix = text[len(digits):]
            value = int(digits, 16)
        elif any(ch in text for ch in ".e") or (text.endswith("f") and not text.startswith("0x")):
            body = text.rstrip("f")
            return (f"_f32({float(body)!r})", "f32") if text.endswith("f") else (
                repr(float(body)), "f64")
        else:
            digits = text.rstrip("ul")
            suffix = text[len(digits):]
            value = int(digits)
        if value >= 2**63 or ("ll" in suffix and "u" in suffix):
            return str(value), "u64"
        if "ll" in suffix or value >= 2**32 or ("u" not in suffix and value >= 2**31):
            return str(value), "i64"
        return str(value), "u32" if "u" in suffix else "i32"

    def call(self, tok: _Tok) -> tuple[str, str]:
        name = tok.text
        self.expect("(")
        if name == "atomicAdd":
            self.expect("&")
            target = self.next()
            ctype, array = self.lookup(target.text, target)
            if not array:
                raise self.error("atomicAdd needs &array[index]", target)
            self.expect("[")
            index, _ = self.expr()
            self.expect("]")
            self.expect(",")
            value, vt = self.expr()
            self.expect(")")
            return f"_atomic_add({target.text}, {index}, {self.convert(value, vt, ctype)})", ctype
        args = []
        if not self.accept(")"):
            while True:
                args.append(self.expr())
                if self.accept(")"):
                    break
                self.expect(",")
        if name in _MATH:
            (a, t), *rest = args
            t = t if t in FLOAT_TYPES else "f64"
            code = ", ".join(self.convert(c, ct, t) for c, ct in [(a, args[0][1]), *rest])
            return f"{_MATH[name]}({code})", t
        if name in ("min", "max"):
            t = _common(args[0][1], args[1][1])
            fn = ("_np.fmin" if name == "min" else "_np.fmax") if t in FLOAT_TYPES else name
            return f"{fn}({self.convert(*args[0], t)}, {self.convert(*args[1], t)})", t
        if name == "isnan":
            return f"_isnan({args[0][0]})", "bool"
        if name not in self.funcs or self.funcs[name].kind != "device":
            raise self.error(f"call of {name!r}: not a math builtin of the subset nor a "
                             "__device__ function defined above", tok)
        fn = self.funcs[name]
        if len(args) != len(fn.params):
            raise self.error(f"{name} takes {len(fn.params)} arguments, got {len(args)}", tok)
        code = []
        for (c, t), p in zip(args, fn.params):
            if p.pointer != t.startswith("*") or p.pointer and t[1:] != p.ctype:
                raise self.error(f"argument {p.name!r} of {name}: {t} given for "
                                 f"{'*' if p.pointer else ''}{p.ctype}", tok)
            code.append(c if p.pointer else self.convert(c, t, p.ctype))
        return f"{name}({', '.join(code)})", fn.ret

    # ---------------------------------------------------------------- statements

    def block(self, ind: str) -> list[str]:
        self.expect("{")
        self.scopes.append({})
        out: list[str] = []
        while not self.accept("}"):
            out += self.statement(ind)
        self.scopes.pop()
        return out or [f"{ind}pass"]

    def body(self, ind: str) -> list[str]:
        """A statement used as the body of if/for/while (a block or a single statement)."""
        if self.peek().text == "{":
            return self.block(ind)
        self.scopes.append({})
        out = self.statement(ind)
        self.scopes.pop()
        return out

    def statement(self, ind: str) -> list[str]:
        tok = self.peek()
        if tok.text == "{":
            return self.block(ind)
        if tok.text == ";":
            self.next()
            return []
        if tok.text == "if":
            self.next()
            self.expect("(")
            cond, _ = self.expr()
            self.expect(")")
            out = [f"{ind}if {cond}:", *self.body(ind + "    ")]
            if self.accept("else"):
                out += [f"{ind}else:", *self.body(ind + "    ")]
            return out
        if tok.text == "for":
            return self.for_loop(ind)
        if tok.text == "while":
            self.next()
            self.expect("(")
            cond, _ = self.expr()
            self.expect(")")
            self.loop_steps.append(None)
            out = [f"{ind}while {cond}:", *self.body(ind + "    ")]
            self.loop_steps.pop()
            return out
        if tok.text in ("break", "continue"):
            self.next()
            self.expect(";")
            if not self.loop_steps:
                raise self.error(f"{tok.text} outside a loop", tok)
            step = self.loop_steps[-1] if tok.text == "continue" else None
            return [*(f"{ind}{s}" for s in step or []), f"{ind}{tok.text}"]
        if tok.text == "return":
            self.next()
            if self.accept(";"):
                return [f"{ind}return"]
            code, t = self.expr()
            self.expect(";")
            return [f"{ind}return {self.convert(code, t, self.func.ret)}"]
        if tok.text == "__syncthreads":
            self.next()
            self.expect("(")
            self.expect(")")
            self.expect(";")
            if self.func.kind != "kernel":
                raise self.error("__syncthreads() in a device function", tok)
            self.func.syncs = True
            return [f"{ind}yield"]
        if tok.text == "__shared__":
            self.next()
            ctype = self.parse_type()
            name = self.next().text
            self.expect("[")
            size, _ = self.expr()
            self.expect("]")
            self.expect(";")
            self.declare(name, ctype, array=True)
            return [f"{ind}{name} = _smem.array({name!r}, _{ctype}_dtype, {size})"]
        if self.at_type():
            out = self.declaration(ind)
            self.expect(";")
            return out
        out = self.simple(ind)
        self.expect(";")
        return out

    def declaration(self, ind: str) -> list[str]:
        ctype = self.parse_type()
        out = []
        while True:
            name_tok = self.next()
            if name_tok.kind != "id":
                raise self.error("expected a variable name", name_tok)
            if self.accept("="):
                code, t = self.expr()
                out.append(f"{ind}{name_tok.text} = {self.convert(code, t, ctype)}")
            else:  # C leaves it undefined; a poison value makes its use visible
                out.append(f"{ind}{name_tok.text} = {'_np.nan' if ctype in FLOAT_TYPES else -7}")
            self.declare(name_tok.text, ctype)
            if not self.accept(","):
                return out

    def simple(self, ind: str) -> list[str]:
        """An expression statement: assignment, ++/--, or a call."""
        tok = self.peek()
        if tok.text in ("++", "--"):
            self.next()
            target, t = self.postfix()
            return [f"{ind}{target} = {self.convert_op(target, t, tok.text[0], ('1', 'i32'))}"]
        if tok.kind == "id" and self.peek(1).text == "(" and tok.text not in _BUILTIN_VARS:
            code, _ = self.postfix()
            return [f"{ind}{code}"]
        target, t = self.postfix()
        if target.split("[")[0] in self.consts:
            raise self.error(f"write through the const pointer {target.split('[')[0]!r}", tok)
        op = self.next().text
        if op in ("++", "--"):
            return [f"{ind}{target} = {self.convert_op(target, t, op[0], ('1', 'i32'))}"]
        if op not in _ASSIGN:
            raise self.error("expected an assignment")
        value = self.expr()
        if op == "=":
            return [f"{ind}{target} = {self.convert(value[0], value[1], t)}"]
        return [f"{ind}{target} = {self.convert_op(target, t, op[:-1], value)}"]

    def convert_op(self, target: str, t: str, op: str, value: tuple[str, str]) -> str:
        code, rt = self.apply_binary(op, (target, t), value)
        return self.convert(code, rt, t)

    def for_loop(self, ind: str) -> list[str]:
        self.expect("for")
        self.expect("(")
        self.scopes.append({})
        out: list[str] = []
        if not self.accept(";"):
            out += self.declaration(ind) if self.at_type() else self.simple(ind)
            self.expect(";")
        cond = "True"
        if not self.accept(";"):
            cond, _ = self.expr()
            self.expect(";")
        step: list[str] = []
        if not self.accept(")"):
            step = self.simple("")
            self.expect(")")
        self.loop_steps.append(step)
        body = self.body(ind + "    ")
        self.loop_steps.pop()
        self.scopes.pop()
        return [*out, f"{ind}while {cond}:", *body, *(f"{ind}    {s}" for s in step)]

    # ---------------------------------------------------------------- functions

    def translate(self) -> dict[str, _Func]:
        while self.peek().kind != "eof":
            self.function()
        return self.funcs

    def function(self) -> None:
        kind = None
        while self.peek().text in ("extern", '"C"', "__global__", "__device__",
                                   "__forceinline__", "inline", "static"):
            word = self.next().text
            kind = "kernel" if word == "__global__" else "device" if word == "__device__" else kind
        if kind is None:
            raise self.error("expected a __global__ or __device__ function")
        ret = self.parse_type()
        name = self.next().text
        self.expect("(")
        params = []
        while not self.accept(")"):
            const = self.peek().text == "const"
            ctype = self.parse_type()
            pointer = self.accept("*")
            self.accept("const")
            self.accept("__restrict__")
            params.append(Param(self.next().text, ctype, pointer, const and pointer))
            self.accept(",")
        if kind == "kernel" and ret != "void":
            raise self.error("a kernel returns void")
        fn = _Func(name, kind, ret, params)
        self.func = fn
        self.scopes = [{p.name: (p.ctype, p.pointer) for p in params}]
        self.consts = {p.name for p in params if p.const}
        body = self.block("    ")
        names = [p.name for p in params]
        if kind == "kernel":
            names = ["threadIdx_x", "blockIdx_x", "blockDim_x", "gridDim_x", "_smem", *names]
        fn.lines = [f"def {name}({', '.join(names)}):", *body]
        self.funcs[name] = fn


# =========================================================================== runtime helpers


def _div(a: int, b: int) -> int:
    """C's integer division: truncation toward zero."""
    if b == 0:
        raise EmulatorError("integer division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _mod(a: int, b: int) -> int:
    """C's remainder: ``a - (a / b) * b``, with the sign of ``a``."""
    return a - _div(a, b) * b


def _i32(v: Any) -> int:
    return (int(v) + 2**31) % 2**32 - 2**31


def _u32(v: Any) -> int:
    return int(v) & 0xFFFFFFFF


def _i64(v: Any) -> int:
    return (int(v) + 2**63) % 2**64 - 2**63


def _u64(v: Any) -> int:
    return int(v) & 0xFFFFFFFFFFFFFFFF


def _i16(v: Any) -> int:
    return (int(v) + 2**15) % 2**16 - 2**15


def _trunc(v: Any) -> int:
    if not math.isfinite(v):
        raise EmulatorError(f"conversion of {v} to an integer")
    return int(v)


class _Tracker:
    """Who read and wrote which element, to report conflicting accesses (races)."""

    def __init__(self) -> None:
        self.thread = (0, 0)  # (block, thread) now running
        self.phase = 0  # barrier phase of the running block (shared memory)


class _Array:
    """A flat array as a kernel sees a pointer: bounds-checked, race-checked element access."""

    __slots__ = ("data", "name", "kernel", "tracker", "shared", "writers", "readers", "integer")

    def __init__(self, data: np.ndarray, name: str, kernel: str, tracker: _Tracker,
                 shared: bool = False) -> None:
        self.data, self.name, self.kernel, self.tracker = data, name, kernel, tracker
        self.shared = shared
        self.writers: dict[int, tuple] = {}
        self.readers: dict[int, tuple] = {}
        self.integer = data.dtype.kind in "iub"

    def _where(self, i: Any, verb: str) -> int:
        if not isinstance(i, int | np.integer):
            raise EmulatorError(f"{self.kernel}: index {i!r} of {self.name} is not an integer")
        i = int(i)
        if not 0 <= i < self.data.size:
            b, t = self.tracker.thread
            raise EmulatorError(
                f"{self.kernel}: thread {t} of block {b} {verb} {self.name}[{i}], outside "
                f"[0, {self.data.size})")
        return i

    def _key(self) -> tuple:
        return (self.tracker.phase, self.tracker.thread) if self.shared else self.tracker.thread

    def _conflict(self, table: dict, i: int, me: tuple, what: str) -> None:
        other = table.get(i)
        if other is not None and other != me and (not self.shared or other[0] == me[0]):
            b, t = self.tracker.thread
            ob, ot = other[1] if self.shared else other
            raise EmulatorError(
                f"{self.kernel}: race on {self.name}[{i}]: thread {t} of block {b} and thread "
                f"{ot} of block {ob} {what} it"
                + (" between the same two __syncthreads()" if self.shared else
                   " in the same launch"))

    def __getitem__(self, i: Any) -> Any:
        i = self._where(i, "reads")
        me = self._key()
        self._conflict(self.writers, i, me, "write and read")
        prev = self.readers.get(i)
        if prev is None or self.shared and prev[0] != me[0]:  # keep one reader per phase
            self.readers[i] = me
        v = self.data[i]
        return int(v) if self.integer else v

    def __setitem__(self, i: Any, v: Any) -> None:
        i = self._where(i, "writes")
        me = self._key()
        self._conflict(self.writers, i, me, "both write")
        self._conflict(self.readers, i, me, "read and write")
        self.writers[i] = me
        self.data[i] = v


class _Shared:
    """The shared memory of one block: arrays created on first declaration."""

    def __init__(self, kernel: str, tracker: _Tracker) -> None:
        self.arrays: dict[str, _Array] = {}
        self.kernel, self.tracker = kernel, tracker

    def array(self, name: str, dtype: Any, size: int) -> _Array:
        if name not in self.arrays:
            data = np.full(size, np.nan, dtype) if np.dtype(dtype).kind == "f" else np.full(
                size, -7, np.int64).astype(dtype)  # (wrapped, for an unsigned type)
            self.arrays[name] = _Array(data, f"__shared__ {name}", self.kernel, self.tracker,
                                       shared=True)
        return self.arrays[name]


def _atomic_add(arr: _Array, i: Any, v: Any) -> Any:
    """``atomicAdd``: read-modify-write as one step (exempt from race reports)."""
    i = arr._where(i, "atomically adds to")
    old = arr.data[i]
    arr.data[i] = old + v
    return old


def _helpers(real: str) -> dict[str, Any]:
    return {
        "_np": np, "_div": _div, "_mod": _mod, "_i32": _i32, "_u32": _u32, "_i16": _i16,
        "_i64": _i64, "_u64": _u64,
        "_trunc": _trunc, "_f32": np.float32, "_f64": np.float64,
        "_isnan": lambda v: bool(np.isnan(v)), "_atomic_add": _atomic_add,
        **{f"_{t}_dtype": d for t, d in DTYPES.items()},
    }


# =========================================================================== modules


@dataclass
class Kernel:
    """One ``__global__`` function: its parameters and its Python translation."""

    name: str
    file: str
    params: list[Param]
    fn: Any
    syncs: bool
    source: str  # the generated Python, for reading


@dataclass
class Module:
    """A ``.cu`` file translated for one ``real`` type (``"f32"`` or ``"f64"``)."""

    file: str
    real: str
    kernels: dict[str, Kernel]
    python: str

    def __getitem__(self, name: str) -> Kernel:
        if name not in self.kernels:
            raise KeyError(f"{self.file} has no kernel {name!r} (has {sorted(self.kernels)})")
        return self.kernels[name]


def translate(src: str, filename: str = "<source>", real: str = "f32",
              index: str = "i64") -> Module:
    """Translate CUDA C source (the subset) into a :class:`Module` of runnable kernels;
    ``real`` is ``"f32"`` or ``"f64"``, ``index_t`` is ``"i32"`` (int) or ``"i64"``."""
    funcs = _Translator(src, filename, real, index).translate()
    python = "\n\n".join("\n".join(f.lines) for f in funcs.values()) + "\n"
    namespace = _helpers(real)
    exec(compile(python, f"<{filename} as Python>", "exec"), namespace)  # noqa: S102
    kernels = {
        f.name: Kernel(f.name, filename, f.params, namespace[f.name], f.syncs,
                       "\n".join(f.lines))
        for f in funcs.values() if f.kind == "kernel"
    }
    return Module(filename, real, kernels, python)


_cache: dict[tuple[str, str, str], Module] = {}


def load(file: str, dtype: Any = np.float32, wide: bool = True) -> Module:
    """The module of ``tinytrain/kernels/cuda/<file>.cu`` with ``real`` = ``dtype`` and
    ``index_t`` = ``long long`` (``wide``) or ``int`` (cached)."""
    real = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}[np.dtype(dtype)]
    key = (file, real, "i64" if wide else "i32")
    if key not in _cache:
        path = SOURCE_DIR / f"{file}.cu"
        _cache[key] = translate(path.read_text(), path.name, real, key[2])
    return _cache[key]


# =========================================================================== launching


def check_args(kernel: Kernel, args: tuple) -> None:
    """Raise a TypeError unless ``args`` fit the kernel's parameters exactly.

    Arrays (NumPy or CuPy) for pointers: the element type (``real`` is the module's dtype),
    C-contiguous. Scalars: the NumPy type of the C type (``np.int64`` for ``long long``,
    ``np.float32`` for a float ``real``): a Python int could be passed with the wrong width.
    """
    if len(args) != len(kernel.params):
        raise TypeError(f"{kernel.name} takes {len(kernel.params)} arguments, got {len(args)}")
    for p, a in zip(kernel.params, args):
        want = np.dtype(DTYPES[p.ctype])
        where = f"{kernel.name}: argument {p.name!r}"
        if p.pointer:
            if isinstance(a, np.generic) or not hasattr(a, "flags"):
                raise TypeError(f"{where} must be an array of {want}, got {type(a).__name__}")
            if a.dtype != want:
                raise TypeError(f"{where} must be an array of {want}, got one of {a.dtype}")
            if not a.flags.c_contiguous:
                raise TypeError(f"{where} must be C-contiguous (the kernel indexes it as a "
                                "flat array)")
        elif type(a) is not SCALAR_ARG[p.ctype]:
            raise TypeError(f"{where} must be a {SCALAR_ARG[p.ctype].__name__} (C type "
                            f"{p.ctype}), got {type(a).__name__} {a!r}")


def launch(kernel: Kernel, grid: int, block: int, args: tuple) -> None:
    """Run ``kernel<<<grid, block>>>(*args)`` on the CPU, one thread after another.

    Arrays are NumPy arrays, written in place. A kernel with ``__syncthreads()`` runs each
    block in phases: every thread up to its next barrier, then the next phase.
    """
    check_args(kernel, args)
    if not (1 <= block <= 1024) or grid < 1:
        raise EmulatorError(f"{kernel.name}: bad launch configuration <<<{grid}, {block}>>>")
    tracker = _Tracker()
    wrapped = [
        _Array(a.reshape(-1), p.name, kernel.name, tracker) if p.pointer
        else (int(a) if p.ctype in INT_TYPES else a)
        for p, a in zip(kernel.params, args)
    ]
    with np.errstate(all="ignore"):
        for b in range(grid):
            smem = _Shared(kernel.name, tracker)
            if not kernel.syncs:
                for t in range(block):
                    tracker.thread = (b, t)
                    kernel.fn(t, b, block, grid, smem, *wrapped)
                continue
            threads = [(t, kernel.fn(t, b, block, grid, smem, *wrapped)) for t in range(block)]
            tracker.phase = 0
            while threads:
                waiting, done = [], []
                for t, gen in threads:
                    tracker.thread = (b, t)
                    try:
                        next(gen)
                        waiting.append((t, gen))
                    except StopIteration:
                        done.append(t)
                if waiting and done:
                    raise EmulatorError(
                        f"{kernel.name}: in block {b}, threads {done[:4]} finished while "
                        f"threads {[t for t, _ in waiting][:4]} wait at __syncthreads()")
                threads = waiting
                tracker.phase += 1


# =========================================================================== plans


def gemm_rowmajor(step: Any) -> None:
    """``C = alpha * op(A) @ op(B) + beta * C`` on flat NumPy arrays, in the plans' row-major
    convention (a matrix is ``(array, offset, leading dimension)``; see ``plans.Gemm``), for
    each of the ``batch`` products at their strides.

    Checks what cuBLAS would refuse or misread: leading dimensions too small, and matrices
    that run past the end of their array.
    """

    def view(arr: np.ndarray, off: int, rows: int, cols: int, ld: int, name: str) -> np.ndarray:
        if ld < max(1, cols):
            raise EmulatorError(f"GEMM: leading dimension of {name} is {ld} < {cols} columns")
        if off < 0 or off + (rows - 1) * ld + cols > arr.size:
            raise EmulatorError(f"GEMM: {name} ({rows}x{cols}, ld {ld}, offset {off}) runs "
                                f"past its array of {arr.size} elements")
        flat = arr.reshape(-1)[off:]
        return np.lib.stride_tricks.as_strided(
            flat, (rows, cols), (ld * flat.itemsize, flat.itemsize), writeable=True)

    s = step
    for i in range(s.batch):
        a = view(s.a, s.a_off + i * s.stride_a, *((s.k, s.m) if s.transa else (s.m, s.k)),
                 s.lda, "A")
        b = view(s.b, s.b_off + i * s.stride_b, *((s.n, s.k) if s.transb else (s.k, s.n)),
                 s.ldb, "B")
        c = view(s.c, s.c_off + i * s.stride_c, s.m, s.n, s.ldc, "C")
        product = (a.T if s.transa else a) @ (b.T if s.transb else b)
        c[...] = s.alpha * product + (s.beta * c if s.beta else 0)  # beta = 0: C is not read


def gemm_colmajor(transa: bool, transb: bool, m: int, n: int, k: int, alpha: float, a: tuple,
                  lda: int, b: tuple, ldb: int, beta: float, c: tuple, ldc: int,
                  stride_a: int = 0, stride_b: int = 0, stride_c: int = 0,
                  batch: int = 1) -> None:
    """A cuBLAS ``gemm`` (``batch`` > 1: ``gemmStridedBatched``) call in NumPy, by the BLAS
    definition (column-major storage).

    ``a``, ``b``, ``c`` are ``(flat array, element offset)``. Element ``(i, j)`` of a stored
    matrix is at ``offset + i + j * ld``; ``op(A)`` is ``m x k``, ``op(B)`` ``k x n``; product
    ``p`` of a batch starts ``p * stride`` elements further.
    """

    def view(arr_off: tuple, rows: int, cols: int, ld: int, name: str) -> np.ndarray:
        arr, off = arr_off
        if ld < max(1, rows):
            raise EmulatorError(f"cuBLAS: ld{name.lower()} = {ld} < {rows} rows")
        if off + (cols - 1) * ld + rows > arr.size:
            raise EmulatorError(f"cuBLAS: {name} runs past its array")
        flat = arr.reshape(-1)[off:]
        return np.lib.stride_tricks.as_strided(
            flat, (rows, cols), (flat.itemsize, ld * flat.itemsize), writeable=True)

    for p in range(batch):
        op_a = view((a[0], a[1] + p * stride_a), *((k, m) if transa else (m, k)), lda, "A")
        op_b = view((b[0], b[1] + p * stride_b), *((n, k) if transb else (k, n)), ldb, "B")
        out = view((c[0], c[1] + p * stride_c), m, n, ldc, "C")
        product = (op_a.T if transa else op_a) @ (op_b.T if transb else op_b)
        out[...] = alpha * product + (beta * out if beta else 0)


def check_width(step: Any) -> None:
    """Raise unless a launch with 32-bit indices (``not step.wide``) is one where every index
    fits: its largest array plus its grid's threads within ``plans.INDEX_MAX``."""
    from tinytrain.kernels.cuda import plans

    largest = max(a.size for a in step.args if isinstance(a, np.ndarray))
    if not step.wide and not plans.narrow(largest, step.grid * step.block):
        raise EmulatorError(f"{step.kernel}: launched with 32-bit indices but an array has "
                            f"{largest} elements and the grid {step.grid * step.block} threads "
                            f"(plans.INDEX_MAX = {plans.INDEX_MAX})")


def run_plan(steps: list) -> None:
    """Execute a launch plan (``plans.py``) on NumPy arrays: kernels emulated, GEMMs in NumPy.
    Each launch's index width is checked first (:func:`check_width`)."""
    for step in steps:
        if type(step).__name__ == "Gemm":
            gemm_rowmajor(step)
        else:
            check_width(step)
            launch(load(step.file, step.dtype, step.wide)[step.kernel], step.grid, step.block,
                   step.args)


# =========================================================================== the CUDA kernel set

#: What fresh buffers hold in the emulator (``np.empty`` could hold anything, even the
#: right answer from a previous run): NaN for floats, this for integers.
POISON = -7


class _PoisonNumPy:
    """NumPy, except that ``empty`` returns poisoned buffers: an output element that no
    thread writes stays NaN (or ``POISON``) and fails the comparison."""

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)

    @staticmethod
    def empty(shape: Any, dtype: Any = float) -> np.ndarray:
        dtype = np.dtype(dtype)
        return np.full(shape, np.nan if dtype.kind == "f" else POISON, dtype)


class _ImmediateChecks:
    """Cross-entropy target checks without the GPU's asynchrony: raise as soon as reported."""

    def acquire(self, classes: int) -> tuple[int, np.ndarray]:
        self.classes, self.err = classes, np.full(3, POISON, np.int64)
        return 0, self.err

    def record(self, slot: int) -> None:
        count, row, value = (int(v) for v in self.err)
        if count:
            raise ValueError(f"cross_entropy: {count} target(s) outside [0, {self.classes}) "
                             f"(the first at row {row}: {value})")


class Emulated:
    """The executor of :mod:`tinytrain.kernels.cuda` with NumPy arrays and emulated kernels."""

    xp = _PoisonNumPy()

    def cupy(self) -> Any:
        return self.xp

    @staticmethod
    def run(steps: list) -> None:
        run_plan(steps)

    @staticmethod
    def target_checks() -> _ImmediateChecks:
        return _ImmediateChecks()


class emulated_kernels:  # noqa: N801 (used as a context manager, like a function)
    """``with emulated_kernels() as k:`` -- ``k`` is :mod:`tinytrain.kernels.cuda` running
    on NumPy arrays: the same glue and plans as on the GPU, the ``.cu`` kernels emulated."""

    def __enter__(self) -> Any:
        from tinytrain.kernels import cuda

        self.module, self.previous = cuda, cuda.executor
        cuda.executor = Emulated()
        return cuda

    def __exit__(self, *exc: Any) -> None:
        self.module.executor = self.previous
