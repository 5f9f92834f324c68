"""`$ref` resolution for one schema document, through the `referencing` library.

JSON Schema resolves a reference against the base URI of the *resource* that contains it: the
nearest enclosing `$id` (draft 4: `id`), not the document root. Anchors (`$anchor`, draft-4/6/7
`"$id": "#name"`) belong to their resource too, so ``"#bigint"`` inside an embedded resource means
that resource's anchor. `referencing` (the resolver behind the `jsonschema` package) implements
these rules per dialect; this module registers the document and every embedded resource with it and
keeps, for every schema node, its base URI and its JSON pointer (for error messages), so that the
lowering can resolve a `$ref` found at any node. Only references that leave the document (remote
URIs) stay unresolvable.

Nodes are identified by ``id()``: references always sit in nodes of the original document, which
stays alive for the whole lowering.
"""
from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

import referencing
import referencing.exceptions
import referencing.jsonschema

# Keywords whose values are data, not schemas: an `$id` or `$anchor` inside them means nothing.
DATA_KEYWORDS = frozenset({'enum', 'const', 'default', 'examples', 'example'})
ROOT_URI = 'urn:glrmask:root'


class RefError(ValueError):
    """A `$ref` that cannot be resolved inside the document; the message says why."""


def ptr_join(ptr: str, *parts: object) -> str:
    """Append reference tokens to a JSON pointer, escaping ``~`` and ``/``."""
    for p in parts:
        p = p if type(p) is str else str(p)
        if '~' in p or '/' in p:
            p = p.replace('~', '~0').replace('/', '~1')
        ptr += '/' + p
    return ptr


_EMPTY_REGISTRY: referencing.Registry = referencing.Registry()  # (immutable: each document's starts from it)
_SPECIFICATIONS: dict[str, Any] = {}


def _specification(dialect: str) -> Any:
    """``referencing``'s specification of the `$schema` URI `dialect`, 2020-12 when it names none
    it knows (memoized: the lookup of an unknown or empty dialect raises and catches an exception
    inside ``referencing``, a fifth of lowering a small schema's fixed cost)."""
    spec = _SPECIFICATIONS.get(dialect)
    if spec is None:
        spec = referencing.jsonschema.specification_with(dialect, default=referencing.jsonschema.DRAFT202012)
        if len(_SPECIFICATIONS) < 1024:
            _SPECIFICATIONS[dialect] = spec
    return spec


def _crawl_finds_only(root: Any, spec: Any, root_uri: str) -> bool:
    """Would ``Registry.crawl`` of the document, under `spec`, register nothing but the root (no
    embedded resource, no anchor) and raise nothing? Then the registry is left uncrawled: it
    answers every lookup as the crawled one would (lookups that miss crawl it first), and most
    documents are of this kind, whose crawl (a ``Resource`` per subschema) cost a tenth of lowering
    a small schema.

    The walk asks `spec` what the crawl asks it (each subschema's id, anchors and subschemas), and
    answers False, for the crawl to decide, at any id but the root's own URI, any anchor, any
    subschema declaring ``$schema`` (a resource of another dialect) and any error."""
    todo = [root]
    at_root = True
    try:
        while todo:
            node = todo.pop()
            if not at_root and isinstance(node, Mapping) and node.get('$schema') is not None:
                return False
            own = spec.id_of(node)
            if own is not None and (not at_root or urllib.parse.urljoin(root_uri, own.rstrip('#')) != root_uri):
                return False
            for _anchor in spec.anchors_in(node):
                return False
            todo.extend(spec.subresources_of(node))
            at_root = False
    except Exception:  # (the crawl meets it too, and raises or not as it will)
        return False
    return True


class SchemaRefs:
    """The document's resources and the resolver every `$ref` goes through."""

    def __init__(self, root: Any) -> None:
        self.root = root
        dialect = root.get('$schema') if isinstance(root, dict) else None
        first = _specification(dialect if isinstance(dialect, str) else '')
        # Documents without `$schema` often mix drafts (draft-4 tuple `items`); a later draft's
        # walker then meets a value of the wrong kind, and the next older one is tried.
        candidates = [first] + [s for s in (referencing.jsonschema.DRAFT7, referencing.jsonschema.DRAFT4)
                                if s is not first]
        error: Exception | None = None
        for spec in candidates:
            try:
                self._register(root, spec)
                break
            except (referencing.exceptions.Unresolvable, TypeError, ValueError, AttributeError) as e:
                error = e
        else:
            raise RefError(f"the schema's resources cannot be registered: {error}")
        # id(node) -> its path (see _walk_pointers), for every node of the document; public so that
        # the lowering's hot paths test membership without a call
        self.node_paths: dict[int, tuple] = {}
        self._ptr_text: dict[tuple, str] = {}
        self._resolved: dict[tuple[str, str], Any] = {}  # (base URI, $ref) -> (target, pointer) or its RefError
        self.dynamic_anchors: dict[str, int] = {}  # $dynamicAnchor name -> how many nodes declare it
        self._walk_pointers(root)
        # drafts 3-7: "all other properties in a $ref object MUST be ignored" (2019-09 made them apply)
        self.ref_overrides_siblings = isinstance(dialect, str) and first.name in ('draft-03', 'draft-04', 'draft-06', 'draft-07')

    def _register(self, root: Any, spec: Any) -> None:
        self.spec = spec
        resource = spec.create_resource(root)
        root_id = spec.id_of(root) if isinstance(root, dict) else None
        uri = urllib.parse.urljoin(ROOT_URI, root_id) if isinstance(root_id, str) else ROOT_URI
        self.root_uri = uri.split('#', 1)[0] or ROOT_URI
        self.registry = _EMPTY_REGISTRY.with_resource(self.root_uri, resource)
        if not _crawl_finds_only(root, spec, self.root_uri):
            self.registry = self.registry.crawl()
        self._base: dict[int, str] = {}
        # The crawl registered every resource under its id joined to its parent's URI; when that
        # left the root's alone, every base URI is the root's, which the pointer walk gives every
        # node anyway, so the second walk over the resources (as long as the crawl) is skipped.
        # (It could raise nothing the crawl did not: the crawl reads the same ids and subresources.)
        if len(self.registry) > 1:
            self._walk_resources(resource, self.root_uri)

    def _walk_resources(self, resource: referencing.Resource, base: str) -> None:
        todo = [(resource, base)]
        while todo:
            res, b = todo.pop()
            own = res.id()
            if isinstance(own, str):
                b = urllib.parse.urljoin(b, own).split('#', 1)[0] or b
            if isinstance(res.contents, (dict, list)):
                self._base.setdefault(id(res.contents), b)
            for sub in res.subresources():
                todo.append((sub, b))

    def _walk_pointers(self, root: Any) -> None:
        """Paths of every node; nodes `referencing` does not visit inherit their parent's base.
        A path is ``(parent's path, key)`` (the root's ``()``): the lowering asks for the JSON
        pointer of a small share of the nodes, so each is written only when first asked for."""
        if not self._base:
            self._walk_paths(root)
            return
        todo: list[tuple[Any, tuple, str]] = [(root, (), self.root_uri)] if isinstance(root, (dict, list)) else []
        while todo:
            node, path, base = todo.pop()
            if id(node) in self.node_paths:
                continue
            self.node_paths[id(node)] = path
            base = self._base.setdefault(id(node), base)
            if isinstance(node, dict) and isinstance(node.get('$dynamicAnchor'), str):
                name = node['$dynamicAnchor']
                self.dynamic_anchors[name] = self.dynamic_anchors.get(name, 0) + 1
            items = node.items() if isinstance(node, dict) else enumerate(node)
            for k, v in items:
                if isinstance(v, (dict, list)) and not (isinstance(node, dict) and k in DATA_KEYWORDS):
                    todo.append((v, (path, k), base))

    def _walk_paths(self, root: Any) -> None:
        """:meth:`_walk_pointers` of a document of one resource: every base URI is the root's,
        :meth:`base_of`'s default, so none is stored (the same walk otherwise)."""
        paths = self.node_paths
        todo: list[tuple[Any, tuple]] = [(root, ())] if isinstance(root, (dict, list)) else []
        while todo:
            node, path = todo.pop()
            i = id(node)
            if i in paths:
                continue
            paths[i] = path
            if isinstance(node, dict):
                name = node.get('$dynamicAnchor')
                if isinstance(name, str):
                    self.dynamic_anchors[name] = self.dynamic_anchors.get(name, 0) + 1
                for k, v in node.items():
                    if isinstance(v, (dict, list)) and k not in DATA_KEYWORDS:
                        todo.append((v, (path, k)))
            else:
                for k, v in enumerate(node):
                    if isinstance(v, (dict, list)):
                        todo.append((v, (path, k)))

    def in_document(self, node: Any) -> bool:
        """Is `node` part of the schema document (rather than built by the lowering)?"""
        return id(node) in self.node_paths

    def pointer_of(self, node: Any, default: str) -> str:
        """The JSON pointer of a document node (`default` for nodes built by the lowering)."""
        path = self.node_paths.get(id(node))
        return default if path is None else self._pointer(path)

    def _pointer(self, path: tuple) -> str:
        text = self._ptr_text.get(path)
        if text is None:
            keys = []
            p = path
            while p:
                p, k = p
                keys.append(k)
            text = self._ptr_text[path] = ptr_join('', *reversed(keys))
        return text

    def base_of(self, node: Any) -> str:
        """Base URI a `$ref` inside `node` resolves against (the nearest enclosing `$id`)."""
        return self._base.get(id(node), self.root_uri)

    def resolve_dynamic(self, ref: str, at: Any) -> tuple[Any, str]:
        """A `$dynamicRef` whose target does not depend on the dynamic scope: it resolves like `$ref`,
        and either lands on no `$dynamicAnchor` of its name or that name is declared only once in the
        document (so every dynamic scope finds the same schema)."""
        target, ptr = self.resolve(ref, at)
        name = urllib.parse.unquote(ref.split('#', 1)[1]) if '#' in ref else None
        if isinstance(target, dict) and name is not None and target.get('$dynamicAnchor') == name \
                and self.dynamic_anchors.get(name, 0) > 1:
            raise RefError(f"$dynamicRef {ref!r}: {self.dynamic_anchors[name]} schemas declare "
                           f"$dynamicAnchor {name!r}, so the target depends on the dynamic scope")
        return target, ptr

    def resolve(self, ref: str, at: Any) -> tuple[Any, str]:
        """``(target schema, its JSON pointer)`` for the `$ref` value `ref` found in node `at`.

        Memoized per base URI and reference (the registry and the document do not change): a
        schema refers to the same definitions from many places, and each lookup walks the
        pointer through ``referencing``'s subresource checks again."""
        key = (self.base_of(at), ref)
        got = self._resolved.get(key)
        if got is None:
            try:
                got = self._resolve(ref, key[0])
            except RefError as e:
                got = e
            self._resolved[key] = got
        if isinstance(got, RefError):
            raise RefError(*got.args)  # (a fresh one each time, with the same message)
        return got

    def _resolve(self, ref: str, base: str) -> tuple[Any, str]:
        if ref.startswith('#/') and base == self.root_uri and len(self.registry) == 1:
            target = self._walk_fragment(ref)
            if target is not _NOWHERE:
                return target, self.pointer_of(target, urllib.parse.unquote(ref[1:]))
        resolver = self.registry.resolver(base_uri=base)
        try:
            resolved = resolver.lookup(ref)
        except referencing.exceptions.NoSuchAnchor:
            raise RefError(f"$ref anchor {ref!r} not found in its resource") from None
        except referencing.exceptions.PointerToNowhere:
            raise RefError(f"$ref {ref!r} does not resolve") from None
        except referencing.exceptions.Unresolvable:
            raise RefError(f"remote $ref {ref!r} is not supported (only refs into the same document)") from None
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:
            raise RefError(f"$ref {ref!r} does not resolve: {e}") from None
        target = resolved.contents
        return target, self.pointer_of(target, urllib.parse.unquote(ref.split('#', 1)[-1]))

    def _walk_fragment(self, ref: str) -> Any:
        """The node a ``#/…`` reference names in a document of one resource, walked as
        ``referencing`` walks it (the pointer percent-decoded, then split; list indices through
        ``int``); :data:`_NOWHERE` where that walk would fail, so the caller asks ``referencing``
        for its exact error. (A lookup through ``referencing`` rebuilds a resource per step; on the
        large schemas, whose references are nearly all of this kind, it was a twentieth of the
        lowering.)"""
        node = self.root
        for segment in urllib.parse.unquote(ref[2:]).split('/'):
            t = type(node)
            if t is dict:
                node = node.get(segment.replace('~1', '/').replace('~0', '~'), _NOWHERE)
                if node is _NOWHERE:
                    return _NOWHERE
            elif t is list:
                try:
                    node = node[int(segment)]
                except (ValueError, IndexError):
                    return _NOWHERE
            else:
                return _NOWHERE
        return node


_NOWHERE = object()
