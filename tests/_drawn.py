"""What a drawn figure shows, for tests that look at a figure as a reader would."""
import io

from mlp_ref.plots.style import cut_off_texts as _cut_off_after_drawing


def cut_off_texts(fig):
    """``plots.style.cut_off_texts`` of ``fig`` drawn as ``python -m mlp_ref figures`` draws it
    (a PNG at the figure's own dpi)."""
    fig.savefig(io.BytesIO(), format="png")
    return _cut_off_after_drawing(fig)
