// The Linden console's script: small enhancements on top of pages that work without it.
// No inline handlers (the Content-Security-Policy allows this file only).
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  // Confirm before deleting.
  document.querySelectorAll("button.danger").forEach(function (b) {
    b.addEventListener("click", function (ev) {
      if (!window.confirm(b.textContent + "?")) { ev.preventDefault(); }
    });
  });
});
