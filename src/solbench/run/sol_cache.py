"""The default SOL counts cache of a run and of ``solbench sol``.

Apart from :mod:`solbench.run.sol` (which brings the harness and torch) so that ``solbench
sol`` reads a warm cache without starting torch.
"""

from __future__ import annotations


def counts_cache():
    """The default counts cache (:func:`solbench.sol.cache.default_cache_dir`, entries signed
    with the user's trace key, :mod:`solbench.store.auth`), or None when it is turned off or
    the key cannot be had (the bounds are then counted afresh). Raises nothing."""
    from ..sol.cache import CountsCache, default_cache_dir

    root = default_cache_dir()
    if root is None:
        return None
    try:
        from ..store.auth import load_key

        return CountsCache(root, key=load_key(create=True))
    except Exception:  # noqa: BLE001 - no key, no trusted cache: count afresh
        return None
