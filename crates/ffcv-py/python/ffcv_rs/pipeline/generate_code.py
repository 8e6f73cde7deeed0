"""Swapping a class's ``generate_code`` for one built on the class's own: how the built-in
decoders and transforms put their native batch function in front of FFCV's Python code,
which stays the fallback."""

from typing import Any, Callable


def wrap_generate_code(cls: type, wrap: Callable[[Any, Callable], Callable],
                       doc: str) -> type:
    """Class decorator body: ``cls.generate_code`` becomes ``wrap(self, python_code)``,
    where ``python_code`` is the ``generate_code`` the class defined (call it with
    ``self``); ``doc`` is the new method's docstring."""
    python_code = cls.generate_code

    def generate_code(self: Any) -> Callable:
        return wrap(self, python_code)

    generate_code.__doc__ = doc
    generate_code.__qualname__ = f"{cls.__qualname__}.generate_code"
    cls.generate_code = generate_code
    return cls
