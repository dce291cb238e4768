"""The healing loop: a sweep and an event's judgement, the incidents they write, the one restart
path through decide(), verification and the followers after it. Imported by the modules at the
service's top (the operator, the loop's face) and by bootstrap; it imports every wing below it.
"""
