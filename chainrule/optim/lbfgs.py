"""L-BFGS (Nocedal & Wright, Numerical Optimization, Alg. 7.4/7.5) with an optional strong-Wolfe line
search, a port of ``torch.optim.LBFGS`` (itself from Torch7's ``optim.lbfgs``/``lswolfe``).

Like PyTorch's it works on all parameters as one flat vector, takes a single parameter group, calls
``closure`` (which must zero the gradients, compute the loss and call ``backward``) several times per
``step``, and keeps its history in ``state[first parameter]``.
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Iterable

from chainrule.core._backend import np
from chainrule.core.errors import ShapeError
from chainrule.core.grad_mode import enable_grad
from chainrule.numpy import raw
from chainrule.optim.optimizer import Optimizer


def _cubic_interpolate(x1: float, f1: float, g1: float, x2: float, f2: float, g2: float,
                       bounds: tuple | None = None) -> float:
    lo, hi = bounds if bounds is not None else ((x1, x2) if x1 <= x2 else (x2, x1))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square < 0:
        return (lo + hi) / 2.0
    d2 = np.sqrt(d2_square)
    if x1 <= x2:
        min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(min_pos, lo), hi)


def _strong_wolfe(obj: Callable, x: list, t: float, d: Any, f: float, g: Any, gtd: float, c1: float = 1e-4,
                  c2: float = 0.9, tolerance_change: float = 1e-9, max_ls: int = 25) -> tuple:
    d_norm = np.abs(d).max()
    g = g.copy()
    f_new, g_new = obj(x, t, d)
    evals, gtd_new = 1, g_new.dot(d)
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done, it = False, 0
    while it < max_ls:                                   # bracket a point meeting the Wolfe conditions
        if abs(gtd_new) <= -c2 * gtd and not (f_new > f + c1 * t * gtd or (it > 1 and f_new >= f_prev)):
            br, br_f, br_g, done = [t], [f_new], [g_new], True
            break
        if f_new > f + c1 * t * gtd or (it > 1 and f_new >= f_prev) or gtd_new >= 0:
            br, br_f, br_g, br_gtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.copy(), gtd_new
        f_new, g_new = obj(x, t, d)
        evals, gtd_new, it = evals + 1, g_new.dot(d), it + 1
    if it == max_ls:
        br, br_f, br_g = [0, t], [f, f_new], [g, g_new]
    insuf = False
    low, high = (0, 1) if br_f[0] <= br_f[-1] else (1, 0)
    while not done and it < max_ls:                      # zoom into the bracket
        if abs(br[1] - br[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(br[0], br_f[0], br_gtd[0], br[1], br_f[1], br_gtd[1])
        eps = 0.1 * (max(br) - min(br))
        if min(max(br) - t, t - min(br)) < eps:
            if insuf or t >= max(br) or t <= min(br):
                t = max(br) - eps if abs(t - max(br)) < abs(t - min(br)) else min(br) + eps
                insuf = False
            else:
                insuf = True
        else:
            insuf = False
        f_new, g_new = obj(x, t, d)
        evals, gtd_new, it = evals + 1, g_new.dot(d), it + 1
        if f_new > f + c1 * t * gtd or f_new >= br_f[low]:
            br[high], br_f[high], br_g[high], br_gtd[high] = t, f_new, g_new.copy(), gtd_new
            low, high = (0, 1) if br_f[0] <= br_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (br[high] - br[low]) >= 0:
                br[high], br_f[high], br_g[high], br_gtd[high] = br[low], br_f[low], br_g[low], br_gtd[low]
            br[low], br_f[low], br_g[low], br_gtd[low] = t, f_new, g_new.copy(), gtd_new
    return br_f[low], br_g[low], br[low], evals


class LBFGS(Optimizer):
    """Limited-memory BFGS; ``step(closure)`` runs up to ``max_iter`` iterations and returns the first loss.

    >>> import chainrule as cr
    >>> w = cr.nn.Parameter([3.0, -1.0]); opt = cr.optim.LBFGS([w], line_search_fn="strong_wolfe")
    >>> def closure():
    ...     opt.zero_grad(); loss = ((w - 1.0) ** 2).sum(); loss.backward(); return loss
    >>> _ = opt.step(closure); [round(v, 6) for v in w.tolist()]
    [1.0, 1.0]
    """

    def __init__(self, params: Iterable[Any], lr: float = 1, max_iter: int = 20, max_eval: int | None = None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9, history_size: int = 100,
                 line_search_fn: str | None = None) -> None:
        if not lr >= 0:
            raise ValueError(f"LBFGS: lr must be >= 0, got lr={lr}")
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got {line_search_fn!r}")
        super().__init__(params, dict(lr=lr, max_iter=max_iter,
                                      max_eval=max_eval if max_eval is not None else max_iter * 5 // 4,
                                      tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                                      history_size=history_size, line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS: parameter groups are not supported; pass one list of parameters")
        self._params = self.param_groups[0]["params"]

    def add_param_group(self, group: dict) -> None:
        if self.param_groups:
            raise ValueError("LBFGS: parameter groups are not supported; pass one list of parameters")
        super().add_param_group(group)

    def _flat(self, p: Any) -> Any:
        a = p.data if p.data.dtype.kind != "c" else p.data.view(p.data.real.dtype)
        return a.reshape(-1)

    def _gather_flat_grad(self) -> Any:
        out = []
        for p in self._params:
            g = np.zeros(p.data.shape, p.data.dtype) if p.grad is None else np.ascontiguousarray(raw(p.grad))
            out.append((g.view(g.real.dtype) if g.dtype.kind == "c" else g).reshape(-1))
        return np.concatenate(out)

    def _add_grad(self, step: float, update: Any) -> None:
        offset = 0
        for p in self._params:
            flat = self._flat(p)
            flat += step * update[offset:offset + flat.size]
            offset += flat.size
            p._bump()

    def _set_param(self, values: list) -> None:
        for p, v in zip(self._params, values):
            p.data[...] = v
            p._bump()

    def _evaluate(self, closure: Callable, x: list, t: float, d: Any) -> tuple:
        self._add_grad(t, d)
        with enable_grad():
            loss = float(raw(closure()))
        g = self._gather_flat_grad()
        self._set_param(x)
        return loss, g

    def step(self, closure: Callable[[], Any]) -> Any:  # type: ignore[override]
        """Run the L-BFGS iterations; ``closure`` zeroes the gradients, computes the loss and backpropagates."""
        if closure is None:
            raise TypeError("LBFGS.step needs a closure that zeroes the gradients, computes the loss, calls "
                            "backward() and returns the loss")
        grp = self.param_groups[0]
        lr, max_iter, max_eval, history = grp["lr"], grp["max_iter"], grp["max_eval"], grp["history_size"]
        tol_grad, tol_change = grp["tolerance_grad"], grp["tolerance_change"]
        state = self.state.setdefault(self._params[0], {})
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        with enable_grad():
            orig_loss = closure()
        loss, evals = float(raw(orig_loss)), 1
        state["func_evals"] += 1
        g = self._gather_flat_grad()
        if np.abs(g).max() <= tol_grad:
            return orig_loss
        d, t, old_dirs, old_stps, ro, h_diag, prev_g, prev_loss = (state.get(k) for k in (
            "d", "t", "old_dirs", "old_stps", "ro", "H_diag", "prev_flat_grad", "prev_loss"))
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d, old_dirs, old_stps, ro, h_diag = -g, [], [], [], 1
            else:
                y, s = g - prev_g, d * t
                ys = y.dot(s)
                if ys > 1e-10:
                    if len(old_dirs) == history:          # forget the oldest pair
                        del old_dirs[0], old_stps[0], ro[0]
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / y.dot(y)
                al = state.setdefault("al", [None] * history)
                q = -g
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q -= al[i] * old_dirs[i]
                d = q * h_diag
                for i in range(len(old_dirs)):
                    d += (al[i] - old_dirs[i].dot(d) * ro[i]) * old_stps[i]
            prev_g, prev_loss = g.copy(), loss
            t = min(1.0, 1.0 / np.abs(g).sum()) * lr if state["n_iter"] == 1 else lr
            gtd = g.dot(d)
            if gtd > -tol_change:
                break
            ls_evals = 0
            if grp["line_search_fn"] is not None:
                x0 = [p.data.copy() for p in self._params]
                loss, g, t, ls_evals = _strong_wolfe(lambda x, t, d: self._evaluate(closure, x, t, d),
                                                     x0, t, d, loss, g, gtd, max_ls=max_eval - evals)
                self._add_grad(t, d)
            else:
                self._add_grad(t, d)
                if n_iter != max_iter:
                    with enable_grad():
                        loss = float(raw(closure()))
                    g, ls_evals = self._gather_flat_grad(), 1
            evals += ls_evals
            state["func_evals"] += ls_evals
            if n_iter == max_iter or evals >= max_eval or np.abs(g).max() <= tol_grad:
                break
            if np.abs(d * t).max() <= tol_change or abs(loss - prev_loss) < tol_change:
                break
        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
                     prev_flat_grad=prev_g, prev_loss=prev_loss)
        return orig_loss

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore from ``state_dict()`` output (the history lives with the first parameter)."""
        groups = state_dict["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self._params):
            raise ShapeError(f"LBFGS.load_state_dict: the saved state is for {[len(g['params']) for g in groups]} "
                             f"parameters, this optimizer has [{len(self._params)}]; build it over the same "
                             f"parameters in the same order")
        self.param_groups[0].update({k: v for k, v in groups[0].items() if k != "params"})
        self.state = {self._params[int(k)]: copy.deepcopy(v) for k, v in state_dict["state"].items()}
