"""Review pages. Every view needs a role (webapp.roles); READERS may read everything here."""
