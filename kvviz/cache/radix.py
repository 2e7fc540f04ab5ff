"""A radix tree of token sequences for prefix caching at token granularity (SGLang's RadixAttention),
torch-free bookkeeping beside kvviz.cache.block_pool's block hashing (vLLM's full-block names).

Every edge holds a run of tokens; a path from the root spells a cached sequence. ``match`` finds
the longest cached beginning of a prompt, to the token (block hashing only reuses *full* blocks);
``insert`` stores a served sequence, splitting an edge where it diverges. Over ``capacity`` tokens,
the least recently used leaf goes first (a leaf's tokens are no one's prefix); ``evicted`` keeps
what went. ``compare_prefix_caches`` serves one stream of prompts through both designs."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kvviz.cache.block_pool import block_hash


@dataclass(eq=False)
class _Node:
    tokens: tuple[int, ...]                      # the edge into this node
    parent: _Node | None = None
    children: dict[int, _Node] = field(default_factory=dict)     # first token of the edge -> child
    last_used: int = 0


class RadixTree:
    """Cached token sequences, at most ``capacity`` tokens held (every edge's tokens counted once)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("A radix cache holds at least one token.")
        self.capacity, self.root, self.clock = capacity, _Node(()), 0
        self.evicted: list[tuple[int, ...]] = []      # the full sequence of every evicted leaf, in order

    def _tick(self) -> int:
        self.clock += 1
        return self.clock

    def match(self, tokens: Sequence[int]) -> int:
        """Tokens at the start of ``tokens`` already cached; the nodes on the path become recent."""
        node, i, now = self.root, 0, self._tick()
        while i < len(tokens) and tokens[i] in node.children:
            child = node.children[tokens[i]]
            n = _common(child.tokens, tokens[i:])
            child.last_used = now
            i += n
            if n < len(child.tokens):
                break
            node = child
        return i

    def insert(self, tokens: Sequence[int]) -> int:
        """Store ``tokens`` (a served prompt and its output); the tokens newly held. Evicts the least
        recently used leaves (never the path just stored) while over capacity."""
        node, i, now, added = self.root, 0, self._tick(), 0
        toks = tuple(int(t) for t in tokens)
        path = {id(self.root)}
        while i < len(toks):
            child = node.children.get(toks[i])
            if child is None:
                leaf = _Node(toks[i:], node, last_used=now)
                node.children[toks[i]] = leaf
                added += len(leaf.tokens)
                path.add(id(leaf))
                break
            n = _common(child.tokens, toks[i:])
            if n < len(child.tokens):                # diverges inside the edge: split it
                mid = _Node(child.tokens[:n], node, {child.tokens[n]: child}, now)
                node.children[toks[i]] = mid
                child.tokens, child.parent = child.tokens[n:], mid
                child = mid
            child.last_used = now
            path.add(id(child))
            node, i = child, i + n
        self._evict(path)
        return added

    def _evict(self, keep: set[int]) -> None:
        while self.tokens_held > self.capacity:
            leaves = [n for n in self.nodes() if not n.children and id(n) not in keep]
            if not leaves:
                return
            victim = min(leaves, key=lambda n: n.last_used)
            self.evicted.append(self._spell(victim))
            parent = victim.parent
            assert parent is not None
            del parent.children[victim.tokens[0]]
            only = next(iter(parent.children.values())) if len(parent.children) == 1 else None
            if parent is not self.root and only is not None and not {id(parent), id(only)} & keep:
                # a node left with one child merges with it (the tree stays a radix tree)
                parent.tokens, parent.children = parent.tokens + only.tokens, only.children
                for c in parent.children.values():
                    c.parent = parent
                parent.last_used = max(parent.last_used, only.last_used)

    def _spell(self, node: _Node) -> tuple[int, ...]:
        parts = []
        while node is not None and node is not self.root:
            parts.append(node.tokens)
            node = node.parent                      # type: ignore[assignment]
        return tuple(t for p in reversed(parts) for t in p)

    def nodes(self) -> list[_Node]:
        """Every node but the root."""
        out, todo = [], list(self.root.children.values())
        while todo:
            n = todo.pop()
            out.append(n)
            todo.extend(n.children.values())
        return out

    @property
    def tokens_held(self) -> int:
        return sum(len(n.tokens) for n in self.nodes())

    def sequences(self) -> list[tuple[int, ...]]:
        """Every cached sequence ending at a leaf (what the tree spells)."""
        return sorted(self._spell(n) for n in self.nodes() if not n.children)


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


@dataclass(frozen=True)
class PrefixHits:
    """One stream of prompts through one prefix cache: per prompt the positions reused."""

    mode: str                       # "hash" (full blocks) or "radix" (tokens)
    hits: tuple[int, ...]           # positions of each prompt found cached
    held: int                       # blocks ("hash") or tokens ("radix") held at the end
    evicted: int                    # blocks or sequences evicted under the capacity

    @property
    def total(self) -> int:
        return sum(self.hits)


def compare_prefix_caches(prompts: Sequence[Sequence[int]], block_size: int, capacity_tokens: int
                          ) -> tuple[PrefixHits, PrefixHits]:
    """Each prompt, in order, looks up its beginning and is then stored, under block hashing (full
    blocks named by ``block_hash``, LRU over blocks, ``capacity_tokens // block_size`` of them) and
    under a radix tree (token granularity, LRU leaves, ``capacity_tokens``)."""
    names: dict[str, int] = {}                       # block name -> last use
    hash_hits, evicted_blocks, clock = [], 0, 0
    cap_blocks = max(1, capacity_tokens // block_size)
    for p in prompts:
        clock += 1
        parent, n, chain = None, 0, []
        for i in range(len(p) // block_size):
            parent = block_hash(parent, p[i * block_size:(i + 1) * block_size])
            chain.append(parent)
        for name in chain:
            if name not in names:
                break
            names[name] = clock
            n += block_size
        hash_hits.append(n)
        for name in chain:
            names[name] = clock
        while len(names) > cap_blocks:
            del names[min(names, key=names.__getitem__)]
            evicted_blocks += 1
    tree = RadixTree(capacity_tokens)
    radix_hits = []
    for p in prompts:
        radix_hits.append(tree.match(p))
        tree.insert(p)
    return (PrefixHits("hash", tuple(hash_hits), len(names), evicted_blocks),
            PrefixHits("radix", tuple(radix_hits), tree.tokens_held, len(tree.evicted)))
