"""Grad mode as context managers and decorators (with and without parentheses, on generators)."""
import pytest

import chainrule as cr


def test_no_grad_decorator_covers_a_generators_body_at_every_step():
    x = cr.tensor(1.0, requires_grad=True)

    @cr.no_grad()
    def gen(x):
        seen = yield x * 2
        assert seen == "sent" and not cr.is_grad_enabled()
        yield x * 3
        return "done"

    g = gen(x)
    assert next(g).requires_grad is False
    assert cr.is_grad_enabled()                      # the caller's mode between steps
    assert g.send("sent").requires_grad is False
    with pytest.raises(StopIteration) as stop:
        next(g)
    assert stop.value.value == "done"


def test_an_exception_thrown_into_a_decorated_generator_reaches_it_in_its_mode():
    @cr.no_grad()
    def gen():
        try:
            yield 1
        except ValueError:
            yield cr.is_grad_enabled()

    g = gen()
    next(g)
    assert g.throw(ValueError()) is False


@pytest.mark.parametrize("decorator, inside", [(cr.no_grad, False), (cr.enable_grad, True)])
def test_bare_decorators_without_parentheses(decorator, inside):
    x = cr.tensor(1.0, requires_grad=True)

    @decorator
    def f(x):
        return x * 2, cr.is_grad_enabled()

    with cr.set_grad_enabled(not inside):
        y, mode = f(x)
    assert isinstance(y, cr.Tensor) and mode is inside and y.requires_grad is inside
    assert f.__name__ == "f"


def test_set_grad_enabled_decorates_generators_too():
    x = cr.tensor(1.0, requires_grad=True)

    @cr.set_grad_enabled(False)
    def gen():
        yield x * 2

    assert next(gen()).requires_grad is False and cr.is_grad_enabled()
