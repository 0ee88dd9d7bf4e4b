"""From a model's artifacts and this machine's facts to the executor that serves it.

The data flows in this order: ``inventory`` (which installed runtime reaches which device, the probe report's
runtimes section), ``failed_artifacts`` (artifacts whose recorded check failed are left out), ``selector`` (the
pure ranking of candidates, each with its reason), ``calibration`` and ``timing`` (candidates measured against the
CPU reference and timed side by side), ``cache`` (measurements remembered per machine and runtime versions),
``guard`` (no executor answers before it agreed with the reference) and ``background`` (measuring after ``load()``
and switching when the measurement is conclusive). ``edgeaccel.loader`` drives them; nothing here opens a model
for the user.
"""
