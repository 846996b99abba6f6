"""Interruption messages: EventBridge events about instances, delivered through SQS.

AWS announces what is about to happen to an instance (a spot reclaim in two minutes, a
scheduled retirement, a stop, a capacity reservation ending) as EventBridge events; a rule sends
them to one SQS queue per cluster. :mod:`.messages` turns a message body into an
InterruptionEvent (pure); :mod:`.sqs` receives and deletes messages; :mod:`.controller` acts on
them (deletes the NodeClaims of interrupted instances, marks interrupted spot offerings).
"""
