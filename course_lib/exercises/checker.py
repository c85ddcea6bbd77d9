"""Code exercises of every chapter: the learner writes a function, the checker runs it on hidden cases.

An :class:`Exercise` compares the learner's function with the library's reference on cases the
learner does not see (each labelled with the edge it covers), and its feedback names the first
failing case, the known misconception a wrong answer matches, the learner's own line when their
code raises, and a clear stop when it hangs.
"""

from __future__ import annotations

import ast
import copy
import inspect
import linecache
import math
import numbers
import signal
import textwrap
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

from course_lib.exercises.wrapping import wrap

__all__ = ["Case", "Exercise", "Feedback", "Misconception", "difference", "is_stub",
           "is_stub_raise", "is_stub_source", "number", "same", "show", "summarize"]

#: The mime type of the machine-readable result a checker displays next to its text (read by grading).
MIME = "application/vnd.course-lib.exercise+json"

PHRASES = {
    "en": {
        "passed": "Passed: {name} is right on all {n} hidden cases ({labels}).",
        "not_done": "Not done yet: {name} still raises NotImplementedError. Write its body, then run "
                    "this cell again.",
        "wrong": "Not quite: {name} is wrong on the case {label!r}.",
        "input": "input", "expected": "expected", "got": "got", "tensor": "tensor of shape {shape}, {dtype}",
        "misconception": "Known misconception, {name}: this is what you get if you {explain}.",
        "raised": "Your code raised {error} on the case {label!r}",
        "at": "at line {line} of {function}: {source}",
        "timeout": "Stopped after {seconds:g} s on the case {label!r}: {name} did not return. Look for "
                   "a loop that never ends, or work that grows too fast with the input.",
        "first": "first difference at index {index}: expected {expected}, got {got}",
        "same_shape": "same values, but shape {expected} was expected, got {got}",
        "same_dtype": "same values, but dtype {expected} was expected, got {got}",
        "same_type": "same values, but a {expected} was expected, got a {got}",
        "changed": "Not quite: {name} changed its argument {arg} on the case {label!r}; the "
                   "exercise asks you to leave it unchanged. Work on a copy ({arg}.clone()).",
    },
    "nl": {
        "passed": "Geslaagd: {name} klopt in alle {n} verborgen gevallen ({labels}).",
        "not_done": "Nog niet gedaan: {name} geeft nog NotImplementedError. Schrijf de inhoud van de "
                    "functie en voer deze cel opnieuw uit.",
        "wrong": "Nog niet goed: {name} klopt niet in het geval {label!r}.",
        "input": "invoer", "expected": "verwacht", "got": "gekregen", "tensor": "tensor met vorm {shape}, {dtype}",
        "misconception": "Bekende misvatting, {name}: dat krijg je als je {explain}.",
        "raised": "Je code gaf {error} in het geval {label!r}",
        "at": "op regel {line} van {function}: {source}",
        "timeout": "Gestopt na {seconds:g} s in het geval {label!r}: {name} kwam niet terug. Zoek een "
                   "lus die nooit eindigt, of werk dat te snel groeit met de invoer.",
        "first": "eerste verschil op index {index}: verwacht {expected}, gekregen {got}",
        "same_shape": "dezelfde waarden, maar vorm {expected} werd verwacht, gekregen {got}",
        "same_dtype": "dezelfde waarden, maar dtype {expected} werd verwacht, gekregen {got}",
        "same_type": "dezelfde waarden, maar een {expected} werd verwacht, gekregen een {got}",
        "changed": "Nog niet goed: {name} veranderde zijn argument {arg} in het geval {label!r}; "
                   "de opgave vraagt het ongewijzigd te laten. Werk op een kopie ({arg}.clone()).",
    },
}


@dataclass(frozen=True)
class Case:
    """One hidden input to an exercise, labelled with the edge it covers ("ties at .5", "NaN").

    Used by the library's other modules.
    """

    args: tuple
    label: str = "random"
    kwargs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Misconception:
    """A known wrong implementation, its short name and what the learner did ("round half away ...").

    Used by the library's other modules.
    """

    name: str
    explain: str
    wrong: Callable[..., Any]


@dataclass
class Feedback:
    """The outcome of a check: passed or not, the message, and the failing case and misconception.

    Used by the library's other modules.
    """

    exercise: str
    passed: bool
    message: str
    case: str | None = None
    misconception: str | None = None

    def __str__(self) -> str:
        return self.message


def same(expected: Any, got: Any, rtol: float = 1e-5, atol: float = 1e-8) -> bool:
    """Whether ``got`` equals ``expected``: tensors by shape, dtype and value (NaN where NaN), numbers within tolerance.

    Used by the library's other modules.
    """
    if isinstance(expected, torch.Tensor) and expected.dim() == 0 and expected.is_floating_point():
        value = number(got)  # a scale: a float, a numpy float or a 0-d tensor of any float dtype
        return value is not None and same(float(expected), float(value), rtol, atol)
    if isinstance(expected, torch.Tensor) and isinstance(got, np.ndarray):
        try:
            got = torch.from_numpy(got)  # a numpy array counts when its dtype and values agree
        except TypeError:  # numpy dtypes torch lacks (strings, objects)
            return False
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape or got.dtype != expected.dtype:
            return False
        if expected.is_floating_point() or expected.is_complex():
            return torch.allclose(got.cpu(), expected.cpu(), rtol=rtol, atol=atol, equal_nan=True)
        return torch.equal(got.cpu(), expected.cpu())
    if isinstance(expected, np.ndarray):
        return isinstance(got, np.ndarray) and same(torch.from_numpy(expected), torch.from_numpy(got), rtol, atol)
    if isinstance(expected, dict):
        return (isinstance(got, dict) and got.keys() == expected.keys()
                and all(same(expected[k], got[k], rtol, atol) for k in expected))
    if isinstance(expected, (tuple, list)):
        return (isinstance(got, (tuple, list)) and len(got) == len(expected)
                and all(same(e, g, rtol, atol) for e, g in zip(expected, got)))
    if isinstance(expected, bool) or isinstance(got, bool):
        return type(got) is type(expected) and got == expected
    if isinstance(expected, numbers.Real) and isinstance(got, (torch.Tensor, np.ndarray)):
        value = number(got)  # a 0-d tensor for a number
        return value is not None and same(expected, value, rtol, atol)
    if isinstance(expected, numbers.Real) and isinstance(got, numbers.Real):  # numpy's scalars too
        if isinstance(expected, numbers.Integral) and isinstance(got, numbers.Integral):
            return int(got) == int(expected)
        if math.isnan(expected) or math.isnan(got):
            return math.isnan(expected) and math.isnan(got)
        return math.isclose(got, expected, rel_tol=rtol, abs_tol=atol)
    return type(got) is type(expected) and got == expected


def number(value: Any) -> float | int | None:
    """``value`` as a Python number when it is one: a real (numpy's too) or a 0-d tensor or array
    of a real dtype; None otherwise (bools, tensors with elements, text).

    Used by the library's other modules.
    """
    if isinstance(value, torch.Tensor):
        real = value.dtype != torch.bool and not value.is_complex()
        return value.item() if value.dim() == 0 and real else None
    if isinstance(value, np.ndarray):
        return value.item() if value.ndim == 0 and value.dtype.kind in "iuf" else None
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)):
        return value
    return None


def summarize(value: Any, items: int = 6, language: str = "en") -> str:
    """A short text for a value in feedback: tensors as shape, dtype and their first few values.

    Used by the library's other modules.
    """
    if isinstance(value, torch.Tensor):
        flat = value.detach().flatten().tolist()
        shown = ", ".join(f"{v:.6g}" if isinstance(v, float) else str(v) for v in flat[:items])
        more = ", ..." if len(flat) > items else ""
        dtype = str(value.dtype).removeprefix("torch.")
        return PHRASES[language]["tensor"].format(shape=tuple(value.shape), dtype=dtype) + f": [{shown}{more}]"
    if isinstance(value, (list, tuple)) and len(value) > items:
        head = summarize(type(value)(value[:items]), items, language)
        return f"{type(value).__name__} of {len(value)}: " + head[:-1] + ", ...]"
    if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
        inner = "; ".join(summarize(v, items, language) for v in value)  # each tensor by shape, dtype, values
        return f"({inner})" if isinstance(value, tuple) else f"[{inner}]"
    if isinstance(value, float):
        return f"{value:.6g}"
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def difference(expected: Any, got: Any, rtol: float = 1e-5, atol: float = 1e-8,
               language: str = "en") -> str | None:
    """Where ``got`` first differs from ``expected`` (tensors), or what differs when the values agree.

    Used by the library's other modules.
    """
    say = PHRASES[language]
    array = isinstance(got, np.ndarray) and got.dtype.kind in "biuf"
    if isinstance(expected, torch.Tensor) and array:
        got = torch.from_numpy(got)  # an array counts as a tensor: say what else differs
    if isinstance(expected, torch.Tensor) and not isinstance(got, torch.Tensor):
        try:
            values = torch.as_tensor(got, dtype=expected.dtype)
        except (TypeError, ValueError, RuntimeError):
            return None
        if values.shape == expected.shape and same(expected, values, rtol, atol):
            return say["same_type"].format(expected="torch.Tensor", got=type(got).__name__)
        return None
    if not (isinstance(expected, torch.Tensor) and isinstance(got, torch.Tensor)):
        return None
    dtype = str(expected.dtype).removeprefix("torch.")
    if got.shape != expected.shape:
        if got.numel() == expected.numel() and same(expected.flatten(),
                                                    got.flatten().to(expected.dtype), rtol, atol):
            return say["same_shape"].format(expected=tuple(expected.shape), got=tuple(got.shape))
        return None
    cast = got.to(expected.dtype)
    if got.dtype != expected.dtype and same(expected, cast, rtol, atol):
        return say["same_dtype"].format(expected=dtype, got=str(got.dtype).removeprefix("torch."))
    if expected.is_floating_point() or expected.is_complex():
        apart = ~torch.isclose(cast.cpu(), expected.cpu(), rtol=rtol, atol=atol, equal_nan=True)
    else:
        apart = cast.cpu() != expected.cpu()
    if not apart.any():
        return None
    index = tuple(int(i) for i in torch.nonzero(apart)[0])
    return say["first"].format(index=list(index) if len(index) != 1 else index[0],
                               expected=summarize(expected[index].item(), language=language),
                               got=summarize(got[index].item(), language=language))


def show(feedback: Feedback) -> None:
    """Display feedback, wrapped at 88 characters (in a notebook also for grading).

    The machine-readable result keeps the message as written, one statement per line.

    Used by the library's other modules.
    """
    text = wrap(feedback.message)
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        get_ipython = None
    if get_ipython is None or get_ipython() is None:
        print(text)
        return
    result = {"exercise": feedback.exercise, "passed": feedback.passed,
              "message": feedback.message, "case": feedback.case,
              "misconception": feedback.misconception}
    display({"text/plain": text, MIME: result}, raw=True)


def function_name(fn: Callable[..., Any]) -> str:
    """The learner's function as feedback names it: its name, or "your function" for a lambda.

    Used by the library's other modules.
    """
    name = getattr(fn, "__name__", "")
    return name if name.isidentifier() else "your function"


class _Timeout(BaseException):
    """Raised into a learner's function that ran past its time; a BaseException so that `except Exception` lets it through."""


def _call_with_timeout(fn: Callable[..., Any], case: Case, seconds: float) -> Any:
    """``fn(*case.args, **case.kwargs)``, stopped with :class:`_Timeout` after ``seconds``."""
    on_main = threading.current_thread() is threading.main_thread()
    if on_main and hasattr(signal, "setitimer"):  # Unix, and notebook cells: interrupt the Python code itself
        def stop(signum, frame):
            raise _Timeout

        previous = signal.signal(signal.SIGALRM, stop)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            return fn(*case.args, **case.kwargs)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn(*case.args, **case.kwargs)
        except BaseException as err:  # handed back to the caller's thread
            box["error"] = err

    worker = threading.Thread(target=run, daemon=True)  # a hung daemon thread cannot keep Python alive
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise _Timeout
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _learner_line(err: BaseException, fn: Callable[..., Any]) -> tuple[int, str] | None:
    """The deepest line of the learner's own file in ``err``'s traceback, and its source."""
    code = getattr(fn, "__code__", None) or getattr(getattr(fn, "__call__", None), "__code__", None)
    if code is None:
        return None
    found = None
    tb = err.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == code.co_filename:
            found = tb.tb_lineno
        tb = tb.tb_next
    if found is None:
        return None
    return found, linecache.getline(code.co_filename, found).strip()


def _not_done(err: NotImplementedError, fn: Callable[..., Any]) -> bool:
    """Whether the learner's own ``raise NotImplementedError`` raised ``err`` (the stub's, or one
    left in a body half written), not torch or a function it called."""
    where = _learner_line(err, fn)
    if where is None or not where[1]:  # no source to read: the stub, if it looks like one
        return is_stub(fn)
    return is_stub_raise(where[1])


def is_stub_raise(line: str) -> bool:
    """Whether a learner's source line is a stub's ``raise NotImplementedError``.

    Used by the library's other modules.
    """
    return line.strip().startswith("raise NotImplementedError")


def is_stub_source(source: str) -> bool:
    """Whether a function's source is a stub: its body only a docstring and ``raise NotImplementedError``.

    Used by the library's other modules.
    """
    try:
        body = ast.parse(textwrap.dedent(source)).body[0].body
    except (SyntaxError, IndexError, AttributeError):
        return False
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc.func if isinstance(body[0].exc, ast.Call) else body[0].exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def is_stub(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` is still the exercise's stub (not a learner's code that hit torch's own
    NotImplementedError, such as an operation a dtype lacks).

    Used by the library's other modules.
    """
    try:
        return is_stub_source(inspect.getsource(fn))
    except (OSError, TypeError):  # no source to read: judge by the error alone
        return True


@dataclass
class Exercise:
    """A code exercise: the learner's function against ``reference`` on hidden cases, with feedback that teaches.

    ``cases`` is a list of :class:`Case` or a function returning one (for random cases built when
    checked). ``unchanged`` lists the positions of the arguments the text asks the learner to
    leave unchanged (checked after each call). Call the exercise on the learner's function to
    display the feedback.

    Used by the library's other modules.
    """

    name: str
    prompt: str
    reference: Callable[..., Any]
    cases: Callable[[], list[Case]] | list[Case]
    misconceptions: tuple[Misconception, ...] = ()
    compare: Callable[[Any, Any], bool] | None = None
    rtol: float = 1e-5
    atol: float = 1e-8
    timeout_s: float = 10.0
    language: str = "en"
    unchanged: tuple[int, ...] = ()

    def matches(self, expected: Any, got: Any) -> bool:
        """Whether the learner's ``got`` counts as ``expected``."""
        if self.compare is not None:
            return bool(self.compare(expected, got))
        return same(expected, got, self.rtol, self.atol)

    def check(self, fn: Callable[..., Any]) -> Feedback:
        """Run ``fn`` on every hidden case and return the feedback on the first that fails."""
        say = PHRASES[self.language]
        cases = self.cases() if callable(self.cases) else list(self.cases)
        for index, case in enumerate(cases):
            expected = self.reference(*copy.deepcopy(case.args), **copy.deepcopy(case.kwargs))
            mine = Case(copy.deepcopy(case.args), case.label, copy.deepcopy(case.kwargs))
            try:
                got = _call_with_timeout(fn, mine, self.timeout_s)
            except NotImplementedError as err:  # "not done" only for the stub's own raise
                if _not_done(err, fn):
                    return Feedback(self.name, False, say["not_done"].format(name=function_name(fn)), case.label)
                return Feedback(self.name, False, self._raised(err, fn, case), case.label)
            except _Timeout:
                text = say["timeout"].format(seconds=self.timeout_s, label=case.label, name=function_name(fn))
                return Feedback(self.name, False, text, case.label)
            except Exception as err:
                return Feedback(self.name, False, self._raised(err, fn, case), case.label)
            changed = self._changed(fn, case, mine)
            if changed is not None:
                return Feedback(self.name, False, say["changed"].format(
                    name=function_name(fn), arg=changed, label=case.label), case.label)
            if not self.matches(expected, got):
                return self._wrong(case, expected, got, cases[:index])
        labels = ", ".join(dict.fromkeys(c.label for c in cases))
        return Feedback(self.name, True, say["passed"].format(name=self.name, n=len(cases), labels=labels))

    def _raised(self, err: Exception, fn: Callable[..., Any], case: Case) -> str:
        say = PHRASES[self.language]
        text = say["raised"].format(error=f"{type(err).__name__}: {err}", label=case.label)
        where = _learner_line(err, fn)
        if where is not None:
            text += "\n  " + say["at"].format(line=where[0], function=function_name(fn), source=where[1])
        return text + f"\n  {say['input']}: {self._inputs(case)}"

    def _changed(self, fn: Callable[..., Any], case: Case, mine: Case) -> str | None:
        """The name of the first argument in ``unchanged`` that ``fn`` changed, or None."""
        for position in self.unchanged:
            if not same(case.args[position], mine.args[position], rtol=0.0, atol=0.0):
                try:
                    return list(inspect.signature(fn).parameters)[position]
                except (TypeError, ValueError, IndexError):  # no signature: count the arguments
                    return f"#{position + 1}"
        return None

    def _agrees(self, known: Misconception, earlier: list[Case]) -> bool:
        """Whether ``known`` gives the reference's answer on the ``earlier`` cases, as the learner
        did: a misconception that would have failed there is not the learner's."""
        for case in earlier:
            try:
                wrong = known.wrong(*copy.deepcopy(case.args), **copy.deepcopy(case.kwargs))
            except Exception:  # a wrong implementation need not cope with every edge
                continue
            expected = self.reference(*copy.deepcopy(case.args), **copy.deepcopy(case.kwargs))
            if not self.matches(expected, wrong):
                return False
        return True

    def _wrong(self, case: Case, expected: Any, got: Any, earlier: list[Case] = ()) -> Feedback:
        say = PHRASES[self.language]
        lines = [say["wrong"].format(name=self.name, label=case.label),
                 f"  {say['input']}: {self._inputs(case)}",
                 f"  {say['expected']}: {summarize(expected, language=self.language)}",
                 f"  {say['got']}: {summarize(got, language=self.language)}"]
        where = difference(expected, got, self.rtol, self.atol, self.language)
        if where is not None:
            lines.append(f"  {where}")
        for known in self.misconceptions:
            try:
                wrong = known.wrong(*copy.deepcopy(case.args), **copy.deepcopy(case.kwargs))
            except Exception:  # a wrong implementation need not cope with every edge
                continue
            if (self.matches(wrong, got) and not self.matches(wrong, expected)
                    and self._agrees(known, list(earlier))):
                lines.append(say["misconception"].format(name=known.name, explain=known.explain))
                return Feedback(self.name, False, "\n".join(lines), case.label, known.name)
        return Feedback(self.name, False, "\n".join(lines), case.label)

    def _inputs(self, case: Case) -> str:
        shown = ([summarize(a, language=self.language) for a in case.args]
                 + [f"{k}={summarize(v, language=self.language)}" for k, v in case.kwargs.items()])
        return ", ".join(shown) or "(none)"

    def __call__(self, fn: Callable[..., Any], must_pass: bool = False) -> None:
        """Check ``fn`` and display the feedback; ``must_pass`` (a worked solution's cell) raises if it fails."""
        feedback = self.check(fn)
        show(feedback)
        if must_pass and not feedback.passed:
            raise AssertionError(f"the worked solution of {self.name} fails its "
                                 "checker:\n" + wrap(feedback.message))
