"""`dsx demo`: the whole lifecycle, configure → certify → operate, on a simulated cluster in one command.

A platform engineer should see every piece work together on a laptop before trusting it with
a fleet. Nothing here decides anything: the demo calls the same packages the commands use
(recipes, bundles, signing, validation, certify, the sentinel pipeline) against a real control
plane from `dsx sim`, and records what each step did, so the summary can only be as green as
the pieces are.
"""
