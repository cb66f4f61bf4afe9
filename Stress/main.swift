import Evented
print("evented-stress: not yet")
