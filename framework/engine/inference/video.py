"""Video super-resolution through PyAV (the optional `video` extra: FFmpeg's libraries in its wheel).

    srgrad-infer -i clip.mp4 -o clip_x4.mp4 [-n MODEL] [-t 256|auto] [--tta] [--outscale 2]
                 [--codec libx264] [--crf 18] [--preset medium]

Frames are decoded, converted to RGB with the source's own colour matrix and range, upscaled a
batch at a time (tiles as for images), converted back with the same matrix and range into the
source's pixel format, and kept losslessly (FFV1) in segments of `segment` frames in a hidden work
folder beside the output, `.<output name>.srgrad-video/`: each segment is written atomically, so
Ctrl-C or kill -9 keeps every finished one and the same command continues after them (a
manifest refuses a different command's folder). When every frame is done the segments are encoded
once with `--codec/--crf/--preset` into the output (written atomically), with the source's frame
timestamps, time base, frame rate, colour tags (matrix, range, primaries, transfer) and pixel
format, and every audio and subtitle stream copied packet for packet; then the folder is removed.

Colour rules: a stream tagged BT.601/709/2020 is converted with that matrix; an untagged one with
BT.709 from 720 rows up and BT.601 below (FFmpeg's and players' rule), and the output is tagged
with the matrix used. An unspecified range is limited (MPEG) for yuv formats, full for yuvj.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from ...io.atomic import atomic_open, clean_partial_writes, write_atomic

__all__ = ["VIDEO_EXTENSIONS", "is_video", "unavailable_reason", "upscale_video", "VideoError"]

VIDEO_EXTENSIONS = {".mp4": "mp4", ".m4v": "mp4", ".mov": "mov", ".mkv": "matroska",
                    ".webm": "webm", ".avi": "avi"}
DEFAULT_CODEC = {"webm": "libvpx-vp9"}  # else libx264
DEFAULT_CRF = 18  # x264/x265's visually lossless end; the encoder's own default without a crf option
SEGMENT_FRAMES = 64
_CRF_CODECS = ("libx264", "libx265", "libvpx-vp9", "libsvtav1")
_MANIFEST = "manifest.json"


class VideoError(ValueError):
    """A video the command cannot handle as asked (one line, naming the file or option)."""


def is_video(path) -> bool:
    return Path(path).suffix.lower() in VIDEO_EXTENSIONS


def unavailable_reason() -> str | None:
    try:
        import av  # noqa: F401
    except ImportError as exc:
        return f"video needs PyAV (pip install 'srgrad[video]'): {exc}"
    return None


def _require():
    reason = unavailable_reason()
    if reason:
        raise VideoError(reason)
    import av
    return av


# -- colour ------------------------------------------------------------------------------------------
# AVColorSpace -> swscale's matrix (the reformatter's Colorspace): BT.709, FCC, BT.470BG and
# SMPTE 170M (both BT.601), SMPTE 240M, BT.2020 (non-constant and constant luminance)
_MATRIX = {1: "itu709", 4: "fcc", 5: "itu601", 6: "itu601", 7: "smpte240m", 9: "bt2020", 10: "bt2020"}
_TAG = {"itu709": 1, "itu601": 6, "bt2020": 9, "fcc": 4, "smpte240m": 7}


def _colour(stream, first_frame):
    """(swscale matrix name, AVColorSpace tag, range tag 1 limited / 2 full) of the source."""
    cs = first_frame.colorspace or stream.codec_context.colorspace
    matrix = _MATRIX.get(int(cs))
    if matrix is None:
        matrix = "itu709" if stream.codec_context.height >= 720 else "itu601"
    rng = int(first_frame.color_range or stream.codec_context.color_range or 0)
    if rng not in (1, 2):
        fmt = stream.codec_context.pix_fmt or ""
        rng = 2 if fmt.startswith("yuvj") else 1
    tag = int(cs) if int(cs) in _MATRIX else _TAG[matrix]
    return matrix, tag, rng


_RANGE = {1: "MPEG", 2: "JPEG"}


def _flags():
    """swscale's flags both ways: accurate rounding and full chroma interpolation in and out (its
    default path shifts luma by 1 to 2 levels on a round trip; with these it is exact), bit-exact
    (the same output on every CPU)."""
    from av.video.reformatter import Interpolation as I
    return I.BILINEAR | I.ACCURATE_RND | I.FULL_CHR_H_INT | I.FULL_CHR_H_INP | I.BITEXACT


def _to_rgb(frame, matrix, rng, deep: bool) -> np.ndarray:
    """The frame as float32 (3, H, W) in [0, 1] (full-range RGB from the source's matrix/range)."""
    fmt = "rgb48le" if deep else "rgb24"
    rgb = frame.reformat(format=fmt, src_colorspace=matrix, dst_colorspace=matrix,
                         src_color_range=_RANGE[rng], dst_color_range="JPEG",
                         interpolation=_flags())
    arr = rgb.to_ndarray()
    return (arr.transpose(2, 0, 1).astype(np.float32) / (65535.0 if deep else 255.0))


def _from_rgb(av, q: np.ndarray, pix_fmt, matrix, tag, rng, deep: bool):
    """uint8/uint16 (H, W, 3) -> a VideoFrame in the source's pixel format, matrix and range."""
    frame = av.VideoFrame.from_ndarray(q, format="rgb48le" if deep else "rgb24")
    out = frame.reformat(format=pix_fmt, src_colorspace=matrix, dst_colorspace=matrix,
                         src_color_range="JPEG", dst_color_range=_RANGE[rng],
                         interpolation=_flags())
    out.colorspace, out.color_range = tag, rng
    return out


# -- the work folder ---------------------------------------------------------------------------------
def work_folder(dst) -> Path:
    dst = Path(dst)
    return dst.parent / f".{dst.name}.srgrad-video"


def _segments_done(folder: Path) -> set:
    return {int(p.stem.split("_")[1]) for p in folder.glob("seg_*.mkv") if
            (folder / f"{p.stem}.json").exists()}


def _open_work(folder: Path, manifest: dict) -> set:
    """The finished segments of this command's work folder (made if new); VideoError for a folder
    another command made."""
    folder.mkdir(exist_ok=True)
    clean_partial_writes(folder)
    path = folder / _MANIFEST
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except (OSError, ValueError):
            old = None
        if old != manifest:
            diff = sorted(k for k in manifest if not isinstance(old, dict) or old.get(k) != manifest[k])
            raise VideoError(f"{folder} holds the work of another command (it differs in "
                             f"{', '.join(diff) or 'its manifest'}): run the same command to "
                             f"continue it, or remove the folder to start over")
    else:
        write_atomic(path, json.dumps(manifest, sort_keys=True).encode())
    return _segments_done(folder)


# -- super-resolution of frames ----------------------------------------------------------------------
class _Upscaler:
    """RGB float frames (3, H, W) -> quantised SR frames (H', W', 3), a batch at a time."""

    def __init__(self, model, info, tile, overlap, self_ensemble, outscale, outscale_mode,
                 bits, max_memory, shape, say, frames_per_batch):
        from .upscale import channel_fn, checked_outscale_size, model_in_channels, size_rules
        self.scale = int(info["scale"])
        self.fn = channel_fn(model, model_in_channels(info), self.scale, self_ensemble)
        self.overlap, self.bits, self.mode = overlap, bits, outscale_mode
        c, h, w = shape
        self.size = None if outscale is None else \
            checked_outscale_size((h, w), outscale, "--outscale", "the video's frames")
        self.tile, self.batch, self.per_batch = tile, None, frames_per_batch
        if tile == "auto":
            from .autotile import auto_tile
            fixed = (c * h * w * 4 + 3 * h * w * self.scale ** 2 * (bits // 8))
            plan = auto_tile(model, self._run_probe, shape, overlap, max_memory, fixed,
                             self_ensemble, size_rules(info))
            self.tile, self.batch = plan.tile, plan.batch
            if self.tile is not None:
                self.per_batch = 1  # a tiled frame is the budget's batch
                say(f"{plan}")
            elif plan.per_pixel and plan.budget:  # whole frames: as many as the budget holds
                room = (plan.budget - fixed - plan.overhead) / (plan.per_pixel * h * w)
                self.per_batch = max(1, min(frames_per_batch, int(room)))

    def _run_probe(self, lq):
        self.frames([lq])

    def frames(self, batch):
        """A list of (3, H, W) float frames -> their (H', W', 3) uint8/uint16 SR."""
        from .upscale import _quantise_tiles, resize_quantised, sr_tiles
        s, dtype = self.scale, np.uint16 if self.bits == 16 else np.uint8
        results = []
        if self.tile is None:  # the whole frames, stacked
            sr = self.fn(np.stack(batch))
            for one in sr:
                q = np.empty((one.shape[1], one.shape[2], 3), dtype)
                _quantise_tiles(q, [((0, one.shape[1] // s, 0, one.shape[2] // s), s, one)],
                                slice(0, 3), self.bits, s)
                results.append(q)
        else:
            for img in batch:
                q = np.empty((img.shape[1] * s, img.shape[2] * s, 3), dtype)
                _quantise_tiles(q, sr_tiles(self.fn, img, self.tile, self.overlap, self.batch),
                                slice(0, 3), self.bits, s)
                results.append(q)
        if self.size is not None:
            results = [q if q.shape[:2] == tuple(self.size) else
                       resize_quantised(q, self.size, self.mode) for q in results]
        return results


# -- the command --------------------------------------------------------------------------------------
def upscale_video(model, info: dict, src, dst, tile=None, overlap: int = 16,
                  self_ensemble: bool = False, outscale: float | None = None,
                  outscale_mode: str = "bicubic", codec: str | None = None, crf: int | None = None,
                  preset: str | None = None, batch: int = 4, segment: int = SEGMENT_FRAMES,
                  max_memory: int | None = None, progress: bool = True, say=print) -> dict:
    """Upscale the video `src` into `dst` (module docstring); resumable. Returns {"frames": n,
    "size": (W, H), "resumed": frames found done}. `tile`: None (whole frames, `batch` at a time),
    a size, or "auto"; `segment`: frames per resumable segment."""
    av = _require()
    from tqdm.auto import tqdm
    src, dst = Path(src), Path(dst)
    if Path(os.path.abspath(src)) == Path(os.path.abspath(dst)):
        raise VideoError(f"--output {dst} is the input: choose another file")
    fmt = VIDEO_EXTENSIONS.get(dst.suffix.lower())
    if fmt is None:
        raise VideoError(f"--output {dst}: not a video file name (one of "
                         f"{', '.join(sorted(VIDEO_EXTENSIONS))})")
    for name, value in (("batch", batch), ("segment", segment)):
        if int(value) < 1:
            raise VideoError(f"{name} must be >= 1, got {value}")
    try:
        container = av.open(str(src))
    except (av.error.FFmpegError, OSError) as exc:
        raise VideoError(f"--input {src}: cannot read it as a video: {exc}") from None
    with container:
        if not container.streams.video:
            raise VideoError(f"--input {src}: no video stream")
        vin = container.streams.video[0]
        total = vin.frames or None
        codec = codec or DEFAULT_CODEC.get(fmt, "libx264")
        if codec not in av.codecs_available:
            raise VideoError(f"--codec {codec}: not in this FFmpeg build (PyAV {av.__version__})")
        manifest = {"input": os.path.abspath(src), "input_size": src.stat().st_size,
                    "input_mtime_ns": src.stat().st_mtime_ns, "model": info.get("model"),
                    "scale": int(info["scale"]), "tile": tile, "overlap": overlap,
                    "tta": bool(self_ensemble), "outscale": outscale, "outscale_mode": outscale_mode,
                    "segment": int(segment)}
        folder = work_folder(dst)
        done = _open_work(folder, json.loads(json.dumps(manifest, default=str)))
        upscaler, colour, pix_fmt, deep = None, None, None, False
        bar = tqdm(total=total, desc="frames", unit="frame", disable=not progress)
        resumed, index, pending = 0, 0, []
        try:
            for frame in container.decode(vin):
                k = index // segment
                index += 1
                if colour is None:
                    colour = _colour(vin, frame)
                    pix_fmt = frame.format.name
                    deep = any(c.bits > 8 for c in frame.format.components)
                if k in done:
                    resumed += 1
                    bar.update(1)
                    continue
                pending.append(frame)
                if len(pending) == segment:
                    upscaler = _write_segment(av, folder, k, pending, upscaler, colour, pix_fmt,
                                              deep, model, info, tile, overlap, self_ensemble,
                                              outscale, outscale_mode, max_memory, batch, bar, say)
                    pending = []
            if pending:
                upscaler = _write_segment(av, folder, (index - 1) // segment, pending, upscaler,
                                          colour, pix_fmt, deep, model, info, tile, overlap,
                                          self_ensemble, outscale, outscale_mode, max_memory,
                                          batch, bar, say)
        finally:
            bar.close()
        if index == 0:
            raise VideoError(f"--input {src}: the video stream has no frames")
    _mux(av, src, dst, fmt, folder, -(-index // segment), codec, crf, preset, colour, pix_fmt)
    shutil.rmtree(folder, ignore_errors=True)
    return {"frames": index, "resumed": resumed}


def _write_segment(av, folder, k, frames, upscaler, colour, pix_fmt, deep, model, info, tile,
                   overlap, self_ensemble, outscale, outscale_mode, max_memory, batch, bar, say):
    """Upscale `frames` and write them as segment k (FFV1 in Matroska, lossless, plus a JSON of
    their timestamps), atomically: the .json first, the .mkv last (the mark of a finished one).
    A batch of frames at a time, each encoded as it comes: memory is one batch, not a segment."""
    matrix, tag, rng = colour
    times = {"pts": [f.pts for f in frames], "time_base": [frames[0].time_base.numerator,
                                                           frames[0].time_base.denominator]}
    write_atomic(folder / f"seg_{k:06d}.json", json.dumps(times).encode())
    with atomic_open(folder / f"seg_{k:06d}.mkv") as fh:
        with av.open(fh, "w", format="matroska") as seg:
            stream, i = None, 0
            while i < len(frames):
                rgb = [_to_rgb(f, matrix, rng, deep)
                       for f in frames[i:i + (upscaler.per_batch if upscaler else 1)]]
                if upscaler is None:
                    upscaler = _Upscaler(model, info, tile, overlap, self_ensemble, outscale,
                                         outscale_mode, 16 if deep else 8, max_memory,
                                         rgb[0].shape, say, batch)
                for q in upscaler.frames(rgb):
                    if stream is None:
                        stream = _segment_stream(seg, q.shape, pix_fmt)
                    frame = _from_rgb(av, q, pix_fmt, matrix, tag, rng, deep)
                    frame.pts = i
                    i += 1
                    for packet in stream.encode(frame):
                        seg.mux(packet)
                bar.update(len(rgb))
            for packet in stream.encode(None):
                seg.mux(packet)
    return upscaler


def _segment_stream(seg, shape, pix_fmt):
    """The lossless FFV1 stream of a segment; VideoError for a size the pixel format cannot hold."""
    h, w = shape[:2]
    if pix_fmt.startswith(("yuv420", "yuvj420", "nv12")) and (h % 2 or w % 2):
        raise VideoError(f"the upscaled frames are {w}x{h}: {pix_fmt} needs even sizes (choose "
                         f"an --outscale that gives them)")
    stream = seg.add_stream("ffv1", rate=30)
    stream.width, stream.height, stream.pix_fmt = w, h, pix_fmt
    return stream


def _mux(av, src, dst, fmt, folder, count, codec, crf, preset, colour, pix_fmt):
    """Encode the segments' frames into `dst` (atomically) with the source's timestamps and colour
    tags, and copy every audio and subtitle packet of `src` in time order."""
    from fractions import Fraction
    matrix, tag, rng = colour
    with av.open(str(src)) as inp, atomic_open(dst) as fh:
        vin = inp.streams.video[0]
        with av.open(fh, "w", format=fmt) as out:
            first = json.loads((folder / "seg_000000.json").read_text())
            tb = Fraction(*first["time_base"])
            rate = vin.average_rate or vin.guessed_rate or Fraction(1, 1) / tb
            vout = out.add_stream(codec, rate=rate)
            vout.time_base = tb
            ctx = vout.codec_context
            ctx.pix_fmt = pix_fmt
            ctx.colorspace, ctx.color_range = tag, rng
            cin = vin.codec_context
            if cin.color_primaries:
                ctx.color_primaries = cin.color_primaries
            if cin.color_trc:
                ctx.color_trc = cin.color_trc
            options = {}
            if codec in _CRF_CODECS:
                options["crf"] = str(DEFAULT_CRF if crf is None else crf)
            elif crf is not None:
                raise VideoError(f"--crf: {codec} has no crf setting (x264, x265, vp9, svtav1 do)")
            if preset is not None:
                options["preset"] = str(preset)
            vout.options = options
            copies = {s.index: out.add_stream_from_template(s) for s in inp.streams
                      if s.type in ("audio", "subtitle")}
            others = (p for p in inp.demux(*[s for s in inp.streams if s.index in copies])
                      if p.dts is not None)
            held = next(others, None)

            def flush(until):
                nonlocal held
                while held is not None and (until is None or held.dts * held.time_base <= until):
                    stream = copies[held.stream.index]
                    held.stream = stream
                    out.mux(held)
                    held = next(others, None)

            def write(packets):
                for packet in packets:
                    if packet.dts is not None:
                        flush(packet.dts * packet.time_base)
                    out.mux(packet)
            started = False
            for k in range(count):
                times = json.loads((folder / f"seg_{k:06d}.json").read_text())
                with av.open(str(folder / f"seg_{k:06d}.mkv")) as seg:
                    for pts, frame in zip(times["pts"], seg.decode(video=0)):
                        if not started:
                            vout.width, vout.height = frame.width, frame.height
                            started = True
                        frame.pts, frame.time_base = pts, tb
                        frame.colorspace, frame.color_range = tag, rng
                        frame.pict_type = 0  # let the encoder choose (FFV1's are all intra)
                        write(vout.encode(frame))
            write(vout.encode(None))
            flush(None)
