"""What a drawn figure shows, for tests that look at a figure as a reader would."""
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text


def cut_off_texts(fig):
    """The texts of ``fig`` (titles, labels, legends, notes; not tick labels, which matplotlib
    keeps beyond the axes' limits without drawing them) that do not lie wholly inside the
    figure once it is drawn: a title longer than its panel, a label pushed off the edge."""
    FigureCanvasAgg(fig).draw()
    renderer = fig.canvas.get_renderer()
    ticks = {id(label) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
             for label in axis.get_ticklabels(which="both")}
    box = fig.bbox
    out = []
    for text in fig.findobj(Text):
        if not text.get_visible() or not text.get_text() or id(text) in ticks:
            continue
        extent = text.get_window_extent(renderer)
        if extent.x0 < box.x0 or extent.y0 < box.y0 or extent.x1 > box.x1 or extent.y1 > box.y1:
            out.append(text.get_text())
    return out
