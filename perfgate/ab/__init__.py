"""The interleaved A/B and the nightly that uses it: two trees (A, a commit checked out into a
temporary git worktree; B, the tree under test) run the same cases in counterbalanced blocks
(A B, B A, A B, ...), each tree in a long-lived process per GPU that runs its blocks on request;
the cases are spread over the GPUs by what their blocks cost, a case's A and B blocks of one pair
on one GPU; each completed block is kept in a journal, so an interrupted or time-limited A/B
loses nothing and ``--resume`` continues it (planning the lanes again from what it measured).
The verdicts are the one judge's (``verdict.paired``); this package only runs things.

- ``children``: every git and pytest child process, started from one place;
- ``trees``: the repository, A's worktree, and the refusal of an A that is the tree under test;
- ``gpus``: the GPUs to spread the blocks over; ``order``: the block order, what a case's block
  costs and the cases per GPU;
- ``server`` (runs in the child) and ``blocks``: the long-lived block processes;
- ``journal``: the completed blocks, on disk; ``engine``: the lane plan, the schedule over
  GPUs, progress, time limit; ``compare``: one A/B end to end; ``night``: the nightly;
  ``fanin``: its shards;
- ``bisect`` and ``bisect_steps``: ``perfgate bisect``, GOOD and each commit in worktrees of their
  own.
"""


class AbError(Exception):
    """Why an A/B (``perfgate ab``, the nightly's) cannot go on: one line that says what to do
    (exit 2)."""
