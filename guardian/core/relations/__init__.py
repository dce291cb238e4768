"""How containers relate: dependencies, shared namespaces and the orchestrators that own them.
Pure, like all of the core.
"""
