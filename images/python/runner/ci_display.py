"""matplotlib backend `module://ci_display` (MPLBACKEND in the sandbox).

Rendering is Agg.  `plt.show()` sends every open figure to the daemon as an
image/png `display` frame of the running execution and closes it;
`fig.show()` sends that one figure.  The kernel also sends and closes the
figures still open when an execution ends.

Outside the kernel (a script the user's code starts with subprocess, which
inherits MPLBACKEND) there is nobody to send to: the backend then behaves
like Agg and show() does nothing.
"""

import sys

from matplotlib.backend_bases import FigureManagerBase, _Backend
from matplotlib.backends.backend_agg import FigureCanvasAgg


def _kernel():
    mod = sys.modules.get("kernel")
    return getattr(mod, "current", None)


class FigureManagerCI(FigureManagerBase):
    def show(self):
        k = _kernel()
        if k is not None:
            k.show_figure(self.canvas.figure)


class FigureCanvasCI(FigureCanvasAgg):
    manager_class = FigureManagerCI


@_Backend.export
class _BackendCI(_Backend):
    FigureCanvas = FigureCanvasCI
    FigureManager = FigureManagerCI
    mainloop = None

    @staticmethod
    def show(*args, **kwargs):
        k = _kernel()
        if k is not None:
            k.show_figures()
