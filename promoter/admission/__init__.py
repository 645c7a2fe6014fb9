"""Admission, decided purely: what a Kubernetes API server must refuse of our kinds before it
stores them (Kargo's admission webhooks and CRD patterns), every problem of an object at once.

``validate(obj, old, facts)`` takes the object, the stored one on an update, and the facts it
needs (the cluster's objects through a lookup, the step kinds, the time) and returns
:class:`Problem` s, each naming its field. The front ends only carry it: the embedded API
server (``app/embedded.py``), the HTTP admission webhook (``app/admission.py``) and, where
they refuse today, the controller and chat.
"""

from promoter.admission.validation import Facts, Lookup, Problem, validate

__all__ = ["Facts", "Lookup", "Problem", "validate"]
