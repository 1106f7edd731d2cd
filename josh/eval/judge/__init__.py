"""Turn-level judging after TD-Eval (Acikgoz et al., 2025): an LLM judge scores every agent reply of an evaluation on
conversation cohesion, backend knowledge consistency and policy compliance (``rubric``), its output read robustly
(``parse``), over a whole run folder, resumably (``runner``)."""
