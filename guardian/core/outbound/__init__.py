"""What Guardian tells people and programs: notification rules, routes and receivers, delivery
outcomes and hooks. Pure, like all of the core.
"""
