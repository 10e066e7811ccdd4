"""ONNX export of any srgrad model, checked by ONNX Runtime (docs/export.md).

    from framework.onnx import export
    report = export(model, example, "model.onnx")      # example: (1, 3, H, W) float32

The model is traced (trace.py), each recorded Function call is converted by its registered
converter (graph.py, ops/), and the graph is checked with onnx.checker and run in ONNX Runtime
against srgrad's own output before it is written (export.py). Command line: `srgrad-export`
(framework/engine/commands/export.py).
Needs the optional `export` extra (onnx, onnxruntime) to export; registering a converter does not.
"""
from .graph import ConversionError, Graph, converter_for, converters, register_converter
from .trace import Call, Const, Param, Trace, TraceError, Value, trace
from . import ops  # noqa: F401  registers the built-in converters
from .export import ExportError, ExportReport, build_graph, export


def unavailable_reason() -> str | None:
    """Why exporting cannot run here (onnx or onnxruntime missing), or None."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError as exc:
        return f"onnx and onnxruntime are needed (pip install 'srgrad[export]'): {exc}"
    return None


__all__ = ["export", "ExportReport", "ExportError", "ConversionError", "register_converter",
           "converter_for", "converters", "Graph", "build_graph", "trace", "Trace", "TraceError",
           "Call", "Value", "Param", "Const", "unavailable_reason"]
