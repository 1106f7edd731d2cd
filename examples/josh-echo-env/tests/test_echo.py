"""The plugin's own test: josh's environment checker on the echo environment."""

from josh_echo_env import EchoEnv

from josh.envs.checker import check_env


def test_echo_env_passes_the_checker() -> None:
    check_env(EchoEnv())
