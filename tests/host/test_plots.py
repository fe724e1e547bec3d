"""Readable plots (issue 15, item 5), checked on the figures the accuracy report draws: no legend
over a panel, no two tick labels of an axis on top of each other, every legend entry drawn."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402


def _overlap(a, b, tol=1.0) -> bool:
    return a.x0 + tol < b.x1 and b.x0 + tol < a.x1 and a.y0 + tol < b.y1 and b.y0 + tol < a.y1


def check_figure(fig) -> list[str]:
    """What is unreadable in ``fig``: legends over panels, overlapping tick labels, legend entries
    for artists that draw nothing."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    problems = []
    axes = [a for a in fig.axes if a.get_visible()]
    legends = list(fig.legends) + [a.get_legend() for a in axes if a.get_legend() is not None]
    for leg in legends:
        box = leg.get_window_extent(r)
        for i, a in enumerate(axes):
            if _overlap(box, a.get_window_extent(r)):
                problems.append(f"legend {[t.get_text() for t in leg.get_texts()][:2]}... over panel {i} "
                                f"({a.get_title()!r})")
        for h, t in zip(leg.legend_handles, leg.get_texts()):
            if h is None or not t.get_text():
                problems.append(f"legend entry {t.get_text()!r} without an artist")
    for i, a in enumerate(axes):
        for name, labels in (("x", a.get_xticklabels()), ("y", a.get_yticklabels())):
            boxes = [(t.get_text(), t.get_window_extent(r)) for t in labels if t.get_visible() and t.get_text()]
            for j in range(len(boxes)):
                for k in range(j + 1, len(boxes)):
                    if _overlap(boxes[j][1], boxes[k][1]):
                        problems.append(f"panel {i} ({a.get_title()!r}): {name} tick labels {boxes[j][0]!r} and "
                                        f"{boxes[k][0]!r} overlap")
    return problems


def test_the_checker_sees_a_legend_over_the_data_and_crowded_ticks():
    fig = Figure(figsize=(3, 2))
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1], label="a line")
    ax.legend(loc="center")
    ax.set_xticks([0, 0.01, 1])
    ax.set_xticklabels(["zero", "almost zero", "one"])
    problems = check_figure(fig)
    assert any("legend" in p and "over panel 0" in p for p in problems)
    assert any("tick labels 'zero' and 'almost zero' overlap" in p for p in problems)


@pytest.fixture(scope="module")
def accuracy_figures(tmp_path_factory):
    """The figures of a tiny accuracy report, captured as they are saved."""
    from specmem.golden.fixed.accuracy import write_accuracy_report

    saved = []
    original = Figure.savefig

    def capture(self, fname, *args, **kwargs):
        saved.append((str(fname).rsplit("/", 1)[-1], self, check_figure(self)))
        return original(self, fname, *args, **kwargs)

    mp = pytest.MonkeyPatch()
    mp.setattr(Figure, "savefig", capture)
    try:
        write_accuracy_report(str(tmp_path_factory.mktemp("acc")), T=48, long_T=120, small=True, d=8, k=2,
                              progress=lambda m: None)
    finally:
        mp.undo()
    return saved


def test_accuracy_report_figures_are_readable(accuracy_figures):
    names = [n for n, _, _ in accuracy_figures]
    assert {"annihilation.png", "vla.png", "vla_a_spectrum.png", "recall.png", "ranges_vla.png"} <= set(names)
    problems = [f"{n}: {p}" for n, _, ps in accuracy_figures for p in ps]
    assert problems == []
