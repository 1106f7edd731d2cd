"""JOSH search: the beam-search algorithm, its tree records, the rollout runner and its Ray variant."""
