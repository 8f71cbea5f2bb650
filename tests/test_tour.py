"""The main job, end to end: `python -m chainrule tour --fast` runs every section and prints the
figures the seeds print (checked here), in seconds; every time it prints comes from
``chainrule.utils.timing`` (tested here with a fake clock)."""
import os
import re
import subprocess
import sys

import pytest

from chainrule.utils.timing import interleaved_medians, interleaved_samples


@pytest.fixture(scope="module")
def tour_output():
    run = subprocess.run([sys.executable, "-m", "chainrule", "tour", "--fast"], capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_every_section_ran(tour_output):
    import chainrule.tour as tour
    n = len(tour.SECTIONS)
    assert n >= 14
    for i, section in enumerate(tour.SECTIONS, 1):
        assert f"[{i}/{n}] {section.title}" in tour_output
    assert f"tour finished: {n} sections" in tour_output


def test_seed_figures_are_printed(tour_output):
    for line in ["loss 0.016675",
                 "dL/dW1[2][1]: reverse mode -0.04870060, finite difference -0.04870060",
                 "float16 smallest subnormal 6.0e-08; gradients flushed to zero: 33.8%",
                 "with loss scaling by 2^14: zeros 0.0%, median relative error 1.8e-04",
                 "bfloat16 (8 exponent bits): zeros 0.0%, median relative error 2.7e-03"]:
        assert line in tour_output


def test_measured_claims_hold(tour_output):
    picks = re.findall(r"auto picked\s*\n.*?(reverse).*?\n.*?(forward)", tour_output, re.S)
    assert picks, "the choice rule picks reverse for n > m and forward for n < m"
    hvp = float(re.search(r"hvp/grad = ([\d.]+)", tour_output).group(1))
    assert 0.5 < hvp < 6
    assert re.search(r"no_grad: forward .* saved for backward\s+0\.00 MB", tour_output)
    assert "forward 0 B" in tour_output
    acc = float(re.search(r"test accuracy after \d+ epochs: ([\d.]+)%", tour_output).group(1))
    assert acc > 85
    assert "chainrule default (a zero cotangent stays zero): grad = [0.   0.   0.25]" in tour_output
    assert "gradcheck (reverse mode): Jacobian mismatch" in tour_output


def test_every_printed_time_is_a_median_of_interleaved_runs(tour_output):
    sections = re.split(r"\n\[\d+/\d+\] ", tour_output)
    timed = [s for s in sections if re.search(r"\d ?ms\b", s)]
    assert len(timed) == 3                                # modes, hvp, checkpointing
    for text in timed:
        assert "median of 5 interleaved runs" in text, text.splitlines()[0]
    assert re.search(r"test accuracy after \d+ epochs: [\d.]+%\n", tour_output)   # no one-shot time


def test_checkpointing_lines_carry_medians(tour_output):
    section = tour_output.split("Checkpointing's memory/time trade-off")[1].split("planner")[0]
    assert "step time: forward + backward, median of 5 interleaved runs" in section
    rows = {name: (float(flops), float(ratio)) for name, flops, ratio in re.findall(
        r"^ *(no checkpointing|\d+ segments): .* FLOPs +([\d.]+) M, step +[\d.]+ ms \(([\d.]+)x\)$",
        section, re.M)}
    assert len(rows) == 4
    assert rows["6 segments"][0] > rows["no checkpointing"][0]     # sqrt(36) segments: recomputation
    # the time ratio is only sanity-checked: even a median of 5 can invert on a loaded machine
    assert rows["6 segments"][1] > 0


def test_choice_rule_example_prints_medians():
    run = subprocess.run([sys.executable, "examples/choice_rule.py", "--quick"], capture_output=True,
                         text=True, timeout=300, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("median of 3 interleaved runs") == 2       # the Jacobian and hvp tables


def _fake(durations, calls, now):
    """Functions that log their calls and advance the fake clock ``now[0]`` by the next duration."""
    def make(name):
        def fn():
            calls.append(name)
            now[0] += next(durations[name])
        return fn
    return {name: make(name) for name in durations}


def test_interleaved_medians_runs_the_functions_in_turn_and_takes_medians():
    now, calls = [0.0], []
    durations = {"a": iter([9, 1, 2, 3]), "b": iter([9, 5, 7, 6]), "c": iter([9, 4, 4, 8])}
    medians = interleaved_medians(_fake(durations, calls, now), rounds=3, warmup=1,
                                  clock=lambda: now[0])
    # one warm-up each, then rounds of every function once (the first in the given order, the
    # others shuffled)
    assert calls[:6] == ["a", "b", "c"] * 2
    assert sorted(calls[6:9]) == sorted(calls[9:12]) == ["a", "b", "c"]
    assert medians == {"a": 2, "b": 6, "c": 4}               # the warm-ups' 9 s are not samples


def test_interleaved_samples_before_hook_is_untimed():
    now, calls = [0.0], []
    fns = _fake({"a": iter([1, 2]), "b": iter([3, 4])}, calls, now)

    def before(name):
        calls.append("before " + name)
        now[0] += 100

    samples = interleaved_samples(fns, rounds=2, warmup=0, before=before, clock=lambda: now[0])
    assert calls[:4] == ["before a", "a", "before b", "b"]
    assert sorted(calls[4:]) == ["a", "b", "before a", "before b"]
    assert all(calls[i] == "before " + calls[i + 1] for i in range(0, 8, 2))
    assert samples == {"a": [1, 2], "b": [3, 4]}


def test_compile_section_prints_eager_and_compiled_speed(tour_output):
    section = tour_output.split("Speed: capture a step once")[1].split("\n[")[0]
    chain = re.search(r"200-op elementwise chain: eager ([\d.]+) us/op, compiled ([\d.]+) us/op", section)
    tiny = re.search(r"3-4-1 tanh net: eager ([\d.]+) us, compiled ([\d.]+) us", section)
    assert chain and tiny and "median of 5 interleaved runs" in section
    assert float(chain.group(2)) < float(chain.group(1))      # ~5x measured; only the order is checked
    assert "eager_runs=0" in section


def test_transformer_section_prints_the_memory_and_6n_lines(tour_output):
    ratio = float(re.search(r"FLOPs per token, forward\+backward: matmuls [\d,]+ = ([\d.]+) x 6N",
                            tour_output).group(1))
    assert 1.0 < ratio < 1.3                         # 6N plus attention's T x T products
    cut = float(re.search(r"with sqrt\(L\) checkpointing [\d.]+ MiB \(([\d.]+)x\); under no_grad 0 B",
                          tour_output).group(1))
    assert cut < 0.7
    assert "batch doubled (batch 8, n_ctx 32, n_layer 4): saved bytes x2.00" in tour_output
