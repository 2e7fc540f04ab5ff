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
    uid: int = -1                                # a number for drawings, given when first drawn


class RadixTree:
    """Cached token sequences, at most ``capacity`` tokens held (every edge's tokens counted once)."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("A radix cache holds at least one token.")
        self.capacity, self.root, self.clock = capacity, _Node(()), 0
        self.evicted: list[tuple[int, ...]] = []      # the full sequence of every evicted leaf, in order
        self._next_uid = 0

    def uids(self, node: _Node) -> int:
        """A small number naming ``node`` for drawings (given in the order nodes are first drawn)."""
        if node.uid < 0:
            node.uid, self._next_uid = self._next_uid, self._next_uid + 1
        return node.uid

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


@dataclass(frozen=True)
class TreeNode:
    """A node of the radix tree as drawn: ``uid`` stays the node's while it lives (a split keeps it
    on the lower half), ``parent`` -1 under the root, ``depth`` edges from the root."""

    uid: int
    parent: int
    depth: int
    tokens: tuple[int, ...]         # the edge into it
    reused: bool                    # on the path the newest prompt found cached


@dataclass(frozen=True)
class PrefixStep:
    """Both caches right after one prompt looked up its beginning and was stored."""

    hash_hit: int                   # positions found cached as full named blocks
    radix_hit: int                  # positions found cached in the tree, to the token
    hash_blocks: int                # named blocks held
    radix_tokens: int               # tokens the tree holds
    hash_evicted: int               # blocks evicted so far
    radix_evicted: int              # sequences (leaves) evicted so far
    tree: tuple[TreeNode, ...]


@dataclass(frozen=True)
class PrefixTrace:
    """One stream of prompts through block hashing and through a radix tree, step by step."""

    prompts: tuple[tuple[int, ...], ...]
    block_size: int
    capacity_tokens: int
    steps: tuple[PrefixStep, ...]

    def hits(self, mode: str) -> tuple[int, ...]:
        return tuple(s.hash_hit if mode == "hash" else s.radix_hit for s in self.steps)

    def result(self, mode: str) -> PrefixHits:
        last = self.steps[-1]
        if mode == "hash":
            return PrefixHits("hash", self.hits("hash"), last.hash_blocks, last.hash_evicted)
        return PrefixHits("radix", self.hits("radix"), last.radix_tokens, last.radix_evicted)


def _drawn(tree: RadixTree, prompt: Sequence[int], hit: int) -> tuple[TreeNode, ...]:
    """The tree's nodes, parents first; ``reused``: on ``prompt``'s path within its first ``hit`` tokens."""
    uid = tree.uids
    reused, node, i = set(), tree.root, 0
    while i < len(prompt) and prompt[i] in node.children:
        node = node.children[prompt[i]]
        i += len(node.tokens)
        if i <= hit:
            reused.add(id(node))
    out, todo = [], [(c, -1, 1) for c in tree.root.children.values()]
    while todo:
        n, parent, depth = todo.pop(0)
        out.append(TreeNode(uid(n), parent, depth, n.tokens, id(n) in reused))
        todo.extend((c, uid(n), depth + 1) for c in n.children.values())
    return tuple(out)


def trace_prefix_caches(prompts: Sequence[Sequence[int]], block_size: int, capacity_tokens: int) -> PrefixTrace:
    """Each prompt, in order, looks up its beginning and is then stored, under block hashing (full
    blocks named by ``block_hash``, LRU over blocks, ``capacity_tokens // block_size`` of them) and
    under a radix tree (token granularity, LRU leaves, ``capacity_tokens``); a snapshot after each."""
    names: dict[str, int] = {}                       # block name -> last use
    evicted_blocks, clock = 0, 0
    cap_blocks = max(1, capacity_tokens // block_size)
    tree = RadixTree(capacity_tokens)
    steps = []
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
        for name in chain:
            names[name] = clock
        while len(names) > cap_blocks:
            del names[min(names, key=names.__getitem__)]
            evicted_blocks += 1
        hit = tree.match(p)
        tree.insert(p)
        steps.append(PrefixStep(n, hit, len(names), tree.tokens_held, evicted_blocks, len(tree.evicted),
                                _drawn(tree, p, hit)))
    return PrefixTrace(tuple(tuple(int(t) for t in p) for p in prompts), block_size, capacity_tokens, tuple(steps))


def compare_prefix_caches(prompts: Sequence[Sequence[int]], block_size: int, capacity_tokens: int
                          ) -> tuple[PrefixHits, PrefixHits]:
    """``trace_prefix_caches``'s totals: (block hashing, radix tree)."""
    trace = trace_prefix_caches(prompts, block_size, capacity_tokens)
    return trace.result("hash"), trace.result("radix")
