"""Test fakes by area: ``conversation`` (environments, agents, users), ``loop`` (the scripted loop), ``upstream``
(download sources), ``process`` (the josh command as a child process)."""
