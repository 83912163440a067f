"""Line-tracking XML loading for MJCF (standard library only) and the importer's exceptions."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from xml.parsers import expat


class MJCFImportError(ValueError):
    """Invalid MJCF input. The message names the file, the line (when known) and the element.

    ``origin`` is ``(file, line, element)`` of the ``<default>`` entry the offending value came from
    (None when the element itself gave it); the message names it too."""

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None, element: str | None = None,
                 origin: tuple | None = None):  # fmt: skip
        self.file, self.line, self.element, self.origin = file, line, element, origin
        where = []
        if file:
            where.append(str(file))
        if line:
            where.append(f"line {line}")
        prefix = ":".join(where) if where else "<mjcf>"
        el = f" <{element}>" if element else ""
        super().__init__(f"{prefix}:{el} {message}")


class MJCFFileNotFoundError(MJCFImportError, FileNotFoundError):
    """A file the MJCF refers to (include, mesh, heightfield) or the model itself does not exist."""


class Loc:
    """Where each element comes from: ``id(element) -> (file, line)``."""

    def __init__(self):
        self._where: dict[int, tuple[str, int]] = {}
        self._keep: list = []  # keep elements alive so ids stay unique

    def add(self, el, file: str, line: int) -> None:
        self._where[id(el)] = (file, line)
        self._keep.append(el)

    def of(self, el) -> tuple[str | None, int | None]:
        return self._where.get(id(el), (None, None))

    def error(self, el, message: str, cls=MJCFImportError, origin=None, origin_class=None) -> MJCFImportError:
        """The exception for ``el``; ``origin``: the child of ``<default class=origin_class>`` the bad value came from."""
        f, ln = self.of(el) if el is not None else (None, None)
        tag = el.tag if el is not None and isinstance(el.tag, str) else None
        where = None
        if origin is not None:
            of, oln = self.of(origin)
            where = (of, oln, origin.tag)
            cls_txt = f" class={origin_class!r}" if origin_class else ""
            message += f" (value set by <default{cls_txt}> <{origin.tag}> at {of}:line {oln})"
        return cls(message, file=f, line=ln, element=tag, origin=where)


def parse_xml(data: bytes | str, file: str, loc: Loc):
    """Parse ``data`` into an :mod:`xml.etree.ElementTree` tree, recording each element's line."""
    tb = ET.TreeBuilder()
    p = expat.ParserCreate()
    p.buffer_text = True

    def start(tag, attrs):
        el = tb.start(tag, attrs)
        loc.add(el, file, p.CurrentLineNumber)

    p.StartElementHandler = start
    p.EndElementHandler = tb.end
    p.CharacterDataHandler = tb.data
    try:
        if isinstance(data, str):
            p.Parse(data, True)
        else:
            p.Parse(data, True)
        root = tb.close()
    except expat.ExpatError as e:
        raise MJCFImportError(f"malformed XML: {expat.ErrorString(e.code)} (column {e.offset})", file=file, line=e.lineno) from None
    except (AssertionError, IndexError) as e:  # TreeBuilder on unbalanced input
        raise MJCFImportError(f"malformed XML: {e}", file=file) from None
    if root is None:
        raise MJCFImportError("empty XML document", file=file)
    return root


def read_file(path: str, what: str, loc: Loc | None = None, el=None) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        msg = f"{what} file not found: {path!r}"
        if loc is not None and el is not None:
            raise loc.error(el, msg, MJCFFileNotFoundError) from None
        raise MJCFFileNotFoundError(msg, file=path) from None
    except IsADirectoryError:
        msg = f"{what} path is a directory, not a file: {path!r}"
        if loc is not None and el is not None:
            raise loc.error(el, msg) from None
        raise MJCFImportError(msg, file=path) from None
    except OSError as e:
        msg = f"cannot read {what} file {path!r}: {e.strerror or e}"
        if loc is not None and el is not None:
            raise loc.error(el, msg) from None
        raise MJCFImportError(msg, file=path) from None


def expand_includes(root, file: str, loc: Loc, main_dir: str, path_resolver=None, _stack=()) -> None:
    """Replace every ``<include file=...>`` below ``root`` by the children of the included file's root element.

    The included root's tag is not checked (``<mujoco>``, ``<mujocoinclude>`` or any other), as in MuJoCo.
    """
    stack = _stack + (os.path.abspath(file) if os.path.exists(file) else file,)
    for parent in list(root.iter()):
        children = list(parent)
        if not any(c.tag == "include" for c in children):
            continue
        new_children = []
        for c in children:
            if c.tag != "include":
                new_children.append(c)
                continue
            fname = c.get("file")
            if not fname:
                raise loc.error(c, "missing required attribute 'file'")
            inc_file, inc_line = loc.of(c)
            base = os.path.dirname(inc_file) if inc_file and os.path.exists(str(inc_file)) else main_dir
            data = None
            if path_resolver is not None:
                resolved = path_resolver(base, fname)
                if isinstance(resolved, str) and resolved.lstrip().startswith("<"):
                    data, path = resolved, f"<include {fname}>"
                else:
                    path = str(resolved)
            else:
                cands = [os.path.join(base, fname), os.path.join(main_dir, fname)]
                path = next((p for p in cands if os.path.isfile(p)), cands[0])
            if data is None:
                if os.path.abspath(path) in stack:
                    raise loc.error(c, f"include cycle: {fname!r} includes itself (directly or indirectly)")
                data = read_file(path, "include", loc, c)
            if len(stack) > 32:
                raise loc.error(c, "includes nested deeper than 32 levels")
            sub = parse_xml(data, path, loc)
            # the root element is only a wrapper: MuJoCo splices its children whatever its tag
            # (<mujoco>, <mujocoinclude> as in Adroit's door model, or any other)
            expand_includes(sub, path, loc, main_dir, path_resolver, stack)
            new_children.extend(list(sub))
        for c in children:
            parent.remove(c)
        parent.extend(new_children)
