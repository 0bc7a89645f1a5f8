"""Rate policies: u(t), the campus uplink rate, every control period T (``kind = "rate"``).

- ``trivial``: the fixed TBF an administrator would set, u = B_max - R*_DTN, and
  ``none``: no shaping (u = u_max) (``trivial.py``; MLC paper section 3.7);
- ``mlc``: the machine-learning controller, inverse ANN + anti-windup PI
  (``mlc.py``; MLC paper eq. 1, Table 3, Fig. 5).
"""
