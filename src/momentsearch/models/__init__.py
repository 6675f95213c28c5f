"""Model families: each is one folder that reads like its paper, registered by name.

``family`` holds the contract, ``registry`` the names (``create_family``, ``get_family``);
``xml`` is XML (Lei et al., 2020).
"""
