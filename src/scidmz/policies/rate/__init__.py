"""Rate policies: u(t), the campus uplink rate, every control period T (``kind = "rate"``).

- ``trivial``: the fixed TBF an administrator would set, u = B_max - R*_DTN, and
  ``none``: no shaping (u = u_max) (``trivial.py``; MLC paper section 3.7);
- ``mlc``: the machine-learning controller, inverse ANN + anti-windup PI
  (``mlc.py``; MLC paper eq. 1, Table 3, Fig. 5);
- ``pi``: the same anti-windup PI without the ANN, around the trivial rate
  (``pi.py``; ours, the control experiment for the ANN).

``antiwindup.py`` holds the loop ``mlc`` and ``pi`` share (Fig. 5: ``Gains``,
``AntiWindupPI``, the +-Delta_u saturator).
"""
