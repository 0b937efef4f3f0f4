"""A small expression evaluator: the code under test of the python reference exercise."""

import re

_TOKEN = re.compile(r"\s*(?:(\d+(?:\.\d+)?)|(.))")


def tokens(text):
    """Split text into numbers (as float) and single-character operators."""
    out = []
    for number, op in _TOKEN.findall(text):
        if number:
            out.append(float(number))
        elif op.strip():
            out.append(op)
    return out


def evaluate(text):
    """Evaluate +, -, *, / and parentheses with the usual precedence."""
    toks = tokens(text)
    pos = 0

    def peek():
        return toks[pos] if pos < len(toks) else None

    def take():
        nonlocal pos
        tok = peek()
        pos += 1
        return tok

    def atom():
        tok = take()
        if tok == "(":
            value = expr()
            if take() != ")":
                raise ValueError("missing )")
            return value
        if tok == "-":
            return -atom()
        if isinstance(tok, float):
            return tok
        raise ValueError(f"unexpected {tok!r}")

    def term():
        value = atom()
        while peek() in ("*", "/"):
            if take() == "*":
                value *= atom()
            else:
                value /= atom()
        return value

    def expr():
        value = term()
        while peek() in ("+", "-"):
            if take() == "+":
                value += term()
            else:
                value -= term()
        return value

    value = expr()
    if peek() is not None:
        raise ValueError(f"trailing {peek()!r}")
    return value
