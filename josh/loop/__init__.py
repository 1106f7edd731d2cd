"""The self-training loop: recipe, runner, arms, result, report, rendering, costs, seeds and their pooling, stages."""
