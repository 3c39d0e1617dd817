"""PyAV (FFmpeg) backend: frame-exact seeking that decodes only what the requested frames depend on.

Three things make it fast without giving up exactness:
- one seek per group of picture (GOP) that holds a requested frame, then a forward decode;
- packets of non-reference H.264/HEVC pictures that were not asked for are never sent to the decoder
  (nothing else depends on them, so skipping them cannot change any other frame);
- colour conversion and scaling happen in one swscale pass at the small target size.
"""

from __future__ import annotations

import threading

import av
import numpy as np
from av.video.reformatter import VideoReformatter

from .errors import VideoDecodeError
from .index import FrameIndex
from .resize import resize_frame

_H264_NON_REF_TYPES = frozenset({1, 5})  # slice NAL types whose nal_ref_idc tells reference-ness
_HEVC_NON_REF_TYPES = frozenset({0, 2, 4, 6, 8, 10, 12, 14})  # sub-layer non-reference VCL NAL types


def _nal_length_size(codec_name: str, extradata: bytes | None) -> int | None:
    """Size of the NAL length prefix for length-prefixed (MP4/MKV) H.264/HEVC, None if not applicable."""
    if not extradata:
        return None
    if codec_name == "h264" and len(extradata) > 4 and extradata[0] == 1:
        return (extradata[4] & 0x03) + 1
    if codec_name == "hevc" and len(extradata) > 21 and extradata[0] == 1:
        return (extradata[21] & 0x03) + 1
    return None


def _is_disposable(data: bytes, codec_name: str, length_size: int) -> bool:
    """True when every picture slice in the packet is a non-reference picture."""
    i, n, saw_slice = 0, len(data), False
    while i + length_size < n:
        size = int.from_bytes(data[i : i + length_size], "big")
        header = data[i + length_size]
        i += length_size + size
        if codec_name == "h264":
            nal_type = header & 0x1F
            if nal_type in _H264_NON_REF_TYPES:
                saw_slice = True
                if header >> 5:
                    return False
        else:
            nal_type = (header >> 1) & 0x3F
            if nal_type < 32:  # VCL
                saw_slice = True
                if nal_type not in _HEVC_NON_REF_TYPES:
                    return False
    return saw_slice


_H264_IDR = 5
_HEVC_IDR = frozenset({19, 20})  # IDR_W_RADL, IDR_N_LP; CRA (21) and BLA (16-18) start open GOPs


def _is_idr(data: bytes, codec_name: str, length_size: int) -> bool:
    """True when the (length-prefixed) packet holds an IDR picture: nothing after it refers to frames
    before it. A keyframe that is not IDR (H.264 recovery point, HEVC CRA) starts an open GOP."""
    i, n = 0, len(data)
    while i + length_size < n:
        size = int.from_bytes(data[i : i + length_size], "big")
        header = data[i + length_size]
        i += length_size + size
        nal_type = header & 0x1F if codec_name == "h264" else (header >> 1) & 0x3F
        if (codec_name == "h264" and nal_type == _H264_IDR) or (codec_name == "hevc" and nal_type in _HEVC_IDR):
            return True
    return False


_NOT_SHOWN = av.stream.Disposition.attached_pic | av.stream.Disposition.timed_thumbnails | av.stream.Disposition.still_image
"""Video streams a player does not play as the video: cover art, thumbnail tracks, still images."""


def shown_streams(container: av.container.InputContainer) -> list[av.video.stream.VideoStream]:
    """The video streams a player would play (cover pictures and thumbnail tracks left out)."""
    return [s for s in container.streams.video if not (int(s.disposition) & int(_NOT_SHOWN))]


def pick_stream(container: av.container.InputContainer, path: str, stream: int | None = None) -> av.video.stream.VideoStream:
    """The stream a player shows: among the shown video streams the largest picture, then the one flagged
    default, then the longest (a container's first video stream may be a small preview track: reading it
    would silently answer from the wrong pictures). ``stream`` picks a stream by its container index."""
    videos = list(container.streams.video)
    if stream is not None:
        for s in videos:
            if s.index == stream:
                return s
        raise VideoDecodeError(path, f"has no video stream with index {stream} (its video streams: {[s.index for s in videos]})")
    shown = shown_streams(container)
    if not shown:
        raise VideoDecodeError(path, "no video stream" if not videos else "its only video streams are cover pictures or thumbnails")

    def rank(s):
        ctx = s.codec_context
        default = bool(int(s.disposition) & int(av.stream.Disposition.default))
        return (int(ctx.width or 0) * int(ctx.height or 0), default, float(s.duration or 0) * float(s.time_base or 0))

    return max(shown, key=rank)


def _open(path: str, stream: int | None = None) -> tuple[av.container.InputContainer, av.video.stream.VideoStream]:
    try:
        container = av.open(path, metadata_errors="ignore")
    except av.FFmpegError as exc:
        raise VideoDecodeError(path, str(exc)) from exc
    try:
        return container, pick_stream(container, path, stream)
    except BaseException:
        container.close()
        raise


def build_index(path: str, stream: int | None = None) -> tuple[FrameIndex, dict]:
    """Scan packet headers (no decoding) into a ``FrameIndex``; also return the stream's properties
    (``stream``: its container index, ``video_streams``: how many shown video streams the file holds)."""
    container, stream = _open(path, stream)
    try:
        pts, key = [], []
        end_pts = None
        ctx = stream.codec_context
        length_size = _nal_length_size(ctx.name, ctx.extradata)
        open_gop = False
        try:
            for packet in container.demux(stream):
                if packet.pts is None or packet.size == 0:
                    continue
                pts.append(packet.pts)
                key.append(bool(packet.is_keyframe))
                if packet.is_keyframe and length_size is not None and len(pts) > 1 and not open_gop:
                    open_gop = not _is_idr(bytes(packet), ctx.name, length_size)
                if packet.duration:
                    end_pts = max(end_pts or 0, packet.pts + packet.duration)
        except av.FFmpegError as exc:
            # A truncated tail still leaves usable frames; an unreadable head leaves none.
            if not pts:
                raise VideoDecodeError(path, str(exc)) from exc
        if not pts:
            raise VideoDecodeError(path, "the video stream holds no frames")
        tb = float(stream.time_base)
        index = FrameIndex.from_decode_order(pts, key, tb, end_pts)
        rotation = _rotation(path, stream.index)
        width, height = int(ctx.width), int(ctx.height)
        if rotation in (90, 270):  # sizes as a player shows the video
            width, height = height, width
        props = {
            "width": width,
            "height": height,
            "fps": float(stream.average_rate) if stream.average_rate else index.fps,
            "codec": ctx.name,
            "rotation": rotation,
            "format": container.format.name,
            # Decode order differs from presentation order (B-frames); keyframes that are not IDR (open GOPs).
            "reordered": any(b < a for a, b in zip(pts, pts[1:], strict=False)),
            "open_gop": open_gop,
            "stream": stream.index,
            "video_streams": len(shown_streams(container)),
        }
        if props["width"] <= 0 or props["height"] <= 0:
            raise VideoDecodeError(path, "the video stream has no frame size")
        return index, props
    finally:
        container.close()


def _rotation(path: str, stream: int) -> int:
    """The display rotation a player applies (0, 90, 180 or 270 degrees counterclockwise), read from the
    first frame's display matrix (phone videos carry one; the pixels are stored sideways)."""
    container, stream = _open(path, stream)
    try:
        for frame in container.decode(stream):
            return int(round((getattr(frame, "rotation", 0) or 0) / 90.0)) * 90 % 360
    except av.FFmpegError:
        pass
    finally:
        container.close()
    return 0


def rotate(image: np.ndarray, rotation: int) -> np.ndarray:
    """``image`` as displayed: turned ``rotation`` degrees counterclockwise."""
    k = (rotation // 90) % 4
    return np.ascontiguousarray(np.rot90(image, k)) if k else image


class PyAVHandle:
    """One open file. Not thread-safe: the reader gives each thread its own handle."""

    def __init__(self, path: str, index: FrameIndex, rotation: int = 0, stream: int | None = None,
                 name: str | None = None) -> None:  # fmt: skip
        self.path = path  # what is opened: the video's path, or a descriptor the reader pinned (/proc/self/fd/N)
        self.name = name or path  # what errors call it
        self.index = index
        self.rotation = rotation
        self.stream_index = stream
        self._open()
        ctx = self.stream.codec_context
        self._codec = ctx.name
        self._length_size = _nal_length_size(ctx.name, ctx.extradata)
        self._lock = threading.Lock()
        # the handle's own swscale reformatter (a handle decodes in one thread at a time): one scaler context for
        # its frames instead of one per frame
        self._reformatter = VideoReformatter()

    def _open(self) -> None:
        try:
            self.container, self.stream = _open(self.path, self.stream_index)
        except VideoDecodeError as exc:
            raise VideoDecodeError(self.name, exc.reason) from None
        # Slice threads keep latency at one frame (frame threads would delay every seek's first output).
        self.stream.thread_type = "SLICE"

    def close(self) -> None:
        self.container.close()

    def decode(self, wanted: np.ndarray, height: int, width: int) -> dict[int, np.ndarray]:
        """Decode the frames with these presentation indices (sorted, unique) at height x width."""
        with self._lock:
            index = self.index
            out: dict[int, np.ndarray] = {}
            keyframes = np.flatnonzero(index.keyframe)
            if keyframes.size == 0 or keyframes[0] != 0:
                keyframes = np.concatenate([[0], keyframes])
            # One seek per GOP that holds a requested frame, then decode forward within it.
            gop = keyframes[np.searchsorted(keyframes, wanted, side="right") - 1]
            for g in np.unique(gop):
                group = [int(i) for i in wanted[gop == g]]
                k = int(np.searchsorted(keyframes, g))
                # If the decoder cannot reach the frames from their GOP's keyframe (open GOPs, a damaged
                # index), back off one keyframe, then read the file again from its first byte: a seek to the
                # first pts is not the start everywhere (MPEG-TS lands on the second keyframe).
                for seek_idx in (int(g), int(keyframes[k - 1]) if k >= 1 else 0, None):
                    self._decode_from(None if seek_idx is None else int(index.pts[seek_idx]), group, out, height, width)
                    group = [i for i in group if i not in out]
                    if not group:
                        break
                if group:
                    missing = ", ".join(f"{index.times[i]:.3f}s" for i in group[:3])
                    raise VideoDecodeError(self.name, f"frames at {missing} could not be decoded")
            return out

    def _decode_from(
        self, seek_pts: int | None, group: list[int], out: dict[int, np.ndarray], height: int, width: int
    ) -> None:
        """Seek (``None``: reopen the file and start at its first packet), then decode forward until every
        frame of ``group`` is out or has been passed."""
        if seek_pts is None:
            self.container.close()
            self._open()
        container, stream = self.container, self.stream
        pts = self.index.pts
        wanted = {int(pts[i]): i for i in group}
        last_wanted = max(wanted)
        got_any = False
        if seek_pts is not None:
            try:
                container.seek(seek_pts, stream=stream, backward=True, any_frame=False)
            except av.FFmpegError as exc:
                raise VideoDecodeError(self.name, f"seek failed: {exc}") from exc
        ctx = stream.codec_context
        try:
            for packet in container.demux(stream):
                is_flush = packet.size == 0
                if not is_flush and packet.pts not in wanted and not packet.is_keyframe and self._skippable(packet):
                    continue
                for frame in ctx.decode(None if is_flush else packet):
                    i = wanted.pop(frame.pts, None)
                    if i is not None:
                        if self.rotation in (90, 270):  # scale the stored (sideways) picture, then turn it
                            out[i] = rotate(resize_frame(frame, width, height, self._reformatter), self.rotation)
                        else:
                            out[i] = rotate(resize_frame(frame, height, width, self._reformatter), self.rotation)
                        got_any = True
                    if not wanted or (frame.pts is not None and frame.pts >= last_wanted):
                        return
        except av.FFmpegError as exc:
            # A damaged tail: keep what was decoded; the caller reports frames still missing.
            if not got_any:
                raise VideoDecodeError(self.name, str(exc)) from exc

    def _skippable(self, packet: av.Packet) -> bool:
        if self._length_size is None:
            return False
        return _is_disposable(bytes(packet), self._codec, self._length_size)
