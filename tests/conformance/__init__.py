"""The conformance group: Longshoreman against what real peers write and send.

Each module here reads data written by others, from the folder ``LONGSHOREMAN_CONFORMANCE_FIXTURES``
names (:mod:`tests.support.conformance`): Kargo's documentation examples, GitHub's webhook
samples, Argo Rollouts' templates. The rest of the suite runs on the project's own fixtures
(tests/fixtures/); these tests say that those fixtures, and the code they exercise, match the
real thing. Without the variable the group is left out, with one line in the summary. To run
it beside a CI-like layout:

    LONGSHOREMAN_CONFORMANCE_FIXTURES=../shared/fixtures make unit
"""
