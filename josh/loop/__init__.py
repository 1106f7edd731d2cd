"""The self-training loop: recipe, runner, arms, result, report, rendering, costs, seeds, stages and the demo."""
