// The app's own pages (/chats, /admin) in the light or dark theme the person chose in the chat: Chainlit keeps the
// choice in localStorage ("vite-ui-theme": light, dark or system). Loaded in <head> without defer: no flash.
"use strict";
(() => {
  const dark = window.matchMedia("(prefers-color-scheme: dark)");
  const apply = () => {
    const chosen = localStorage.getItem("vite-ui-theme") || "system";
    const isDark = chosen === "dark" || (chosen === "system" && dark.matches);
    document.documentElement.classList.toggle("dark", isDark);
    document.documentElement.style.colorScheme = isDark ? "dark" : "light";
  };
  apply();
  dark.addEventListener("change", apply);
  window.addEventListener("storage", (event) => event.key === "vite-ui-theme" && apply());
})();
