"""Someone else's environment through OpenEnv: ``--env openenv:URL`` (``remote.py``), its branches rebuilt by
replaying their actions on pooled server sessions (``sessions.py``)."""

from josh.envs.openenv.remote import PREFIX, RemoteEnv, RemoteState, is_remote, served_name

__all__ = ["PREFIX", "RemoteEnv", "RemoteState", "is_remote", "served_name"]
